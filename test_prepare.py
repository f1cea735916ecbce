"""data/prepare.py: the validation split, bad settings and faults (one clear line, nothing half-written); and
README's first steps after the Quick start: its words, a second run's folder, a prepared corpus, the GPU's."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from data import prepare as prep
from data.prepare import HEADER, MAGIC, TokenFileError, load_tokens, prepare_text, read_meta, write_tokens

ROOT = os.path.dirname(os.path.abspath(__file__))


def prepare(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, os.path.join(ROOT, 'data', 'prepare.py'), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def split_bytes(out):
    return [bytes(load_tokens(str(out / f'{s}.bin'), vocab_size=256)[0]) for s in ('train', 'val')]


def test_few_files_give_validation_from_every_files_tail_never_the_training_text(tmp_path):
    texts = [f'file {i}: ' + ''.join(f'line {j} of file {i}\n' for j in range(100)) for i in range(3)]
    for i, t in enumerate(texts):
        (tmp_path / f'f{i}.txt').write_text(t)
    # one file: val was the whole file, byte-identical to train; now its last 2%
    prepare_text([str(tmp_path / 'f0.txt')], str(tmp_path / 'one'), num_proc=1)
    train, val = split_bytes(tmp_path / 'one')
    assert train != val and train[:-1] + val[:-1] == texts[0].encode()
    assert len(val) - 1 == round(0.02 * len(texts[0]))
    # three files: val was one whole file (unlike the others); now a tail of each, in proportion
    meta = prepare_text([str(tmp_path / f'f{i}.txt') for i in range(3)], str(tmp_path / 'three'), num_proc=1,
                        val_fraction=0.1)
    train, val = split_bytes(tmp_path / 'three')
    heads, tails = train.split(b'\0')[:-1], val.split(b'\0')[:-1]
    assert [h + t for h, t in zip(heads, tails)] == [t.encode() for t in texts]
    assert [len(t) for t in tails] == [round(0.1 * len(t)) for t in texts]
    assert meta['val_split'] == "every file's tail"


def test_many_files_still_hold_out_whole_files_by_name():
    names = [f'doc{i}.py' for i in range(2000)]
    val = prep.val_names(names, 0.02)
    assert val is not None and 10 <= len(val) < 100 and val == prep.val_names(names[::-1], 0.02)  # order-free
    assert prep.val_names(names[:30], 0.02) is None  # too few held out: every file's tail instead


@pytest.mark.parametrize('fraction', ['1.0', '1.5', '0', 'nan'])
def test_a_val_fraction_outside_zero_to_a_half_is_refused_in_one_line(tmp_path, fraction):
    (tmp_path / 'a.txt').write_text('hello world\n' * 50)
    p = prepare('text', f'--input={tmp_path / "a.txt"}', f'--out={tmp_path / "ds"}', f'--val_fraction={fraction}')
    assert p.returncode != 0 and p.stderr.strip() == (
        f'prepare: --val_fraction must be in (0, 0.5] (a share held out from training), got {float(fraction)}')
    assert not (tmp_path / 'ds').exists()


def test_an_out_that_is_an_existing_file_is_refused_before_any_work(tmp_path):
    (tmp_path / 'a.txt').write_text('hello world\n' * 50)
    for source in ('text', 'stdlib', 'fineweb_edu'):
        p = prepare(source, f'--input={tmp_path / "a.txt"}', f'--out={tmp_path / "a.txt"}')
        assert p.returncode != 0 and p.stderr.strip() == (
            f'prepare: --out={tmp_path / "a.txt"} is an existing file, not a folder: give a folder for train.bin, '
            f'val.bin and meta.json'), p.stderr[-2000:]
        assert (tmp_path / 'a.txt').read_text() == 'hello world\n' * 50


def test_a_token_file_header_claiming_a_huge_vocab_is_refused_not_allocated(tmp_path):
    path = tmp_path / 'train.bin'
    write_tokens(str(path), [np.arange(100) % 7], 300)
    with open(path, 'r+b') as f:
        f.write(HEADER.pack(MAGIC, 1, 2, 10 ** 9, 100))  # the tokens as they are, the vocab a billion
    with pytest.raises(TokenFileError, match=r'claims vocab size 1,000,000,000, outside \[1, 65,536\] for 2-byte '
                                             r'tokens: a damaged header'):
        load_tokens(str(path))
    with pytest.raises(ValueError, match='vocab_size 1000000000 is outside'):  # nor written
        write_tokens(str(tmp_path / 'big.bin'), [np.arange(3)], 10 ** 9)
    assert os.listdir(tmp_path) == ['train.bin']


@pytest.mark.parametrize('field,value,what', [('unigram_entropy', 'n/a', 'a number'), ('encoding', 5, 'a string'),
                                              ('vocab_size', True, 'an int')])
def test_a_malformed_meta_json_is_one_line_naming_the_field(tmp_path, field, value, what):
    (tmp_path / 'meta.json').write_text(json.dumps({'vocab_size': 256, 'encoding': 'bytes', field: value}))
    with pytest.raises(SystemExit, match=f"meta.json: {field} is {value!r}, not {what}; rebuild it with: "):
        read_meta(str(tmp_path))
    (tmp_path / 'meta.json').write_text('{"vocab_size": 2')  # cut mid-write
    with pytest.raises(SystemExit, match='meta.json cannot be read as JSON'):
        read_meta(str(tmp_path))
    os.remove(tmp_path / 'meta.json')
    assert read_meta(str(tmp_path)) == {}  # token files made elsewhere need none


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    with pytest.raises(ValueError, match='token 300 >= vocab_size 256'):
        write_tokens(str(tmp_path / 'train.bin'), [np.arange(10), np.array([300])], 256)
    assert os.listdir(tmp_path) == []


# prepare.py as run, but SIGTERM arrives (as from a scheduler) after the first piece of train.bin is written
KILLED_MID_WRITE = """
import os, runpy, signal, sys, tqdm
def writing_then_killed(items, *args, **kwargs):
    for item in items:
        yield item
        os.kill(os.getpid(), signal.SIGTERM)
tqdm.tqdm = writing_then_killed
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
"""


def test_prepare_stopped_by_sigterm_mid_write_leaves_no_temporary_file(tmp_path):
    p = subprocess.run([sys.executable, '-c', KILLED_MID_WRITE, os.path.join(ROOT, 'data', 'prepare.py'), 'stdlib',
                        f'--out={tmp_path / "ds"}'], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert p.stderr.strip().splitlines()[-1] == (f'prepare: interrupted; nothing half-written is left in '
                                                 f'{tmp_path / "ds"} (files it had finished stay)')
    assert os.listdir(tmp_path / 'ds') == []


def test_an_offline_hub_corpus_fails_fast_with_its_message(tmp_path):
    proxy = 'http://127.0.0.1:9'  # the discard port: no network, every connection refused at once
    env = {k: v for k, v in os.environ.items() if k not in ('HF_HUB_OFFLINE', 'HF_DATASETS_OFFLINE')}
    env.update(HTTP_PROXY=proxy, HTTPS_PROXY=proxy, http_proxy=proxy, https_proxy=proxy)
    t0 = time.time()
    p = prepare('fineweb_edu', f'--out={tmp_path / "ds"}', env=env)
    took = time.time() - t0
    assert p.returncode != 0 and 'could not load HuggingFaceFW/fineweb-edu' in p.stderr, p.stderr[-2000:]
    assert 'huggingface.co is unreachable' in p.stdout and took < 15, (took, p.stdout)  # (retrying took 25 s)


def test_readme_defines_the_words_of_its_logs_and_tables_and_shows_a_newcomers_next_commands():
    readme = open(os.path.join(ROOT, 'README.md')).read()
    quick = readme.split('## Quick start', 1)[1].split('\n## Configs', 1)[0]
    for word in ('`aux` is', '`mfu` is', '**safe gate**', "**KDA's gate**", '`kda\n  safe-gate` KDA with',
                 '**A per channel**', '**NONE floor**'):
        assert word in quick, word  # defined before the commands, tables and figures that use it
    after_log = quick.split('done: 400 steps', 1)[1]
    assert 'python train.py --mixer=kda --out_dir=out/kda' in after_log.split('```sh', 1)[1].split('```', 1)[0]
    commands = readme.split('## Configs and commands', 1)[1].split('\n## ', 1)[0]
    assert 'python train.py --dataset=mytext\n--out_dir=out/mytext' in commands
    gpu = commands.split('needs a CUDA GPU', 1)[1].split('\n\n', 1)[0]
    assert 'config/stdlib_26m.py' in gpu and '23 GB' in gpu and '`torchrun` line (8 GPUs)' in gpu
