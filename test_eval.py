"""eval.py on tiny checkpoints, CPU: the length-scaled tasks, the length, text and needle evaluations, the
lm-evaluation-harness adapter against a task made of local JSON files, the rows, and sweep.py's evaluate hook."""
import dataclasses
import hashlib
import json
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import eval as ev
from conftest import final_bindings, tiny_gpt
from data.prepare import load_tokenizer
from data.synthetic import NONE, accuracy_counts, at_length, evict, reassign

ROOT = os.path.dirname(os.path.abspath(__file__))
SOURCE = np.frombuffer(open(os.path.join(ROOT, 'model.py'), 'rb').read(), np.uint8)  # Python source, as bytes


def tiny(dataset='stdlib', block=32, mixer='eda', seed=0):
    """(a tiny 2-layer model, one linear layer and one attention layer; its checkpoint dict as train.py writes
    it, less the optimizer). Synthetic: 2 live pairs, 2 updates, vocab 64."""
    model = tiny_gpt(mixer, seed=seed, n_layer=2, attn_every=2, block_size=block, vocab_size=64 if dataset in (
        'reassign', 'evict') else 256)
    ckpt = {'model': model.state_dict(), 'model_args': dataclasses.asdict(model.config), 'iter_num': 5,
            'config': {'dataset': dataset, 'num_kv_pairs': 2, 'num_updates': 2, 'move_frac': 0.5, 'seed': 7},
            'encoding': 'bytes' if dataset == 'stdlib' else f'synthetic:{dataset}',
            'data_position': {'dataset': dataset, 'block_size': block, 'iter': 5}}
    return model, ckpt


def test_the_tasks_at_the_training_settings_are_the_same_sequences_as_before_the_key_budget():
    # the key budget is a new parameter: without it reassign and evict draw exactly what they drew before
    h = hashlib.sha256()
    for seed in range(3):
        for x, y in (reassign(np.random.default_rng(seed), 4, 256, 8192, 16, 16, 0.5),
                     reassign(np.random.default_rng(seed), 4, 640, 8192, 48, 48, 1.0),
                     evict(np.random.default_rng(seed), 4, 256, 8192, 16, 32)):
            h.update(x.tobytes() + y.tobytes())
    assert h.hexdigest()[:16] == '3fc5bf9f2f3f84e7'


@pytest.mark.parametrize('task', ['reassign', 'evict'])
def test_past_the_training_length_the_live_pairs_and_keys_stay_while_the_stale_bindings_grow(task):
    n, u, block = 16, 16, 256
    assert at_length(task, block, block, n, u) == {'num_updates': u, 'num_keys': n + u}  # 1x: training's task
    for m in (4, 16):
        kw = at_length(task, m * block, block, n, u)
        assert kw['num_keys'] == n + u and kw['num_updates'] > (m - 1) * block // 4  # the stream fills the length
        rng = np.random.default_rng(m)
        x, y = (reassign(rng, 4, m * block, 8192, n, move_frac=0.5, **kw) if task == 'reassign'
                else evict(rng, 4, m * block, 8192, n, **kw))
        for b in range(4):
            truth = final_bindings(x[b], unique_values=task == 'evict')  # a replay of the stream
            asked = np.flatnonzero(y[b] != -1)
            assert len(truth) == n + u and {int(x[b, p]) for p in asked} == set(truth)  # every key, once each
            assert all(y[b, p] == truth[int(x[b, p])] for p in asked)
            assert sum(v != NONE for v in truth.values()) == n  # the live bindings: training's
            stream = x[b, :2 * (n + (2 if task == 'reassign' else 1) * kw['num_updates'])].reshape(-1, 2)
            writes = stream[(stream != 0).all(1) & (stream[:, 1] != NONE)]
            assert len(writes) > 2 * (n + u)  # keys are bound again after a move or eviction left them NONE


def test_length_eval_scores_the_answers_as_the_whole_forward_does_on_sequences_of_the_eval_seed_alone():
    model, ckpt = tiny('reassign')
    rows = ev.length_eval(model, ckpt, [1, 2], 32, seed=3, budget=32 * 64)
    assert [r['seq_len'] for r in rows] == [32, 64] and rows[0]['num_updates'] == 2 and rows[1]['num_updates'] > 2
    assert ev.length_eval(model, ckpt, [1, 2], 32, seed=3, budget=1) == rows  # a unit a forward: the same
    # the same sequences and counts from the whole logits of GPT.forward
    kw = at_length('reassign', 64, 32, 2, 2)
    seqs = [reassign(np.random.default_rng([3, 64, u]), ev.UNIT, 64, 64, 2, move_frac=0.5, **kw) for u in range(2)]
    x, y = (torch.from_numpy(np.concatenate(a)) for a in zip(*seqs))
    hit, n, hit_none, n_none = (int(v) for v in accuracy_counts(model(x)[0], y))
    r = rows[1]
    assert (r['answers'], r['none_answers']) == (n, n_none) and n == 32 * 4 and n_none > 0
    assert (r['acc'], r['acc_none']) == (hit / n, hit_none / n_none)
    _, text = tiny('stdlib')
    with pytest.raises(ValueError, match='reassign or evict checkpoint'):
        ev.length_eval(model, text, [1], 16, 0, 4096)


def test_text_eval_carries_the_state_past_the_block_and_resets_it_at_each_block_in_the_reset_pass():
    model, _ = tiny('stdlib', block=16)
    fig = ev.text_eval(model, 16, SOURCE, [1, 4], n_windows=3, seed=0, budget=64)
    assert fig['edges'] == [0, 2, 4, 8, 16, 64] and fig['window'] == 64
    assert np.allclose(fig['carried'][:4], fig['reset'][:4], atol=1e-5)  # the first block: the same context
    assert abs(fig['carried'][4] - fig['reset'][4]) > 1e-4                # after it: the state carried or not
    # val_loss is the mean loss of each block alone, as GPT.forward gives it, on windows of the seed alone
    starts = np.random.default_rng([0, 64]).integers(0, len(SOURCE) - 64, size=3)
    xy = torch.from_numpy(np.stack([SOURCE[s:s + 65] for s in starts]).astype(np.int64))
    per_block = [model(xy[:, i:i + 16], xy[:, i + 1:i + 17])[1] for i in range(0, 64, 16)]
    assert abs(fig['val_loss'] - torch.stack(per_block).mean().item()) < 1e-5
    with pytest.raises(ValueError, match='fewer than a window'):
        ev.text_eval(model, 16, SOURCE[:64], [1, 4], 1, 0, 64)


def test_continuation_scores_are_the_log_likelihood_and_greedy_match_of_the_whole_forward():
    model, _ = tiny('stdlib', block=64)
    g = np.random.default_rng(0)
    pairs = [(g.integers(0, 256, n).tolist(), g.integers(0, 256, k).tolist()) for n, k in ((5, 3), (20, 1), (9, 6))]
    pairs.append(([1, 2, 3], model(torch.tensor([[1, 2, 3]]))[0][0, -1:].argmax(-1).tolist()))  # greedy's own token
    for budget in (1, 1000):
        got = ev.continuation_scores(model, pairs, budget)
        for (ctx, cont), (lp, greedy) in zip(pairs, got):
            logp = F.log_softmax(model(torch.tensor([ctx + cont]))[0][0], -1)[len(ctx) - 1:-1]
            assert abs(lp - logp.gather(1, torch.tensor(cont)[:, None]).sum().item()) < 1e-4
            assert greedy == bool((logp.argmax(-1) == torch.tensor(cont)).all())
    assert got[3][1] and not got[0][1]


def test_a_needle_is_a_binding_line_in_held_out_source_read_back_at_the_end_and_rebound_midway():
    tok = load_tokenizer('bytes', 'eval')
    enc, dec = tok.encode_ordinary, tok.decode
    for rebound in (False, True):
        ctx, cands = ev.needle_case(SOURCE, np.random.default_rng(5), 2000, 0.3, rebound, 4, enc, dec)
        again = ev.needle_case(SOURCE, np.random.default_rng(5), 2000, 0.3, rebound, 4, enc, dec)
        assert (ctx, cands) == again and len(ctx) == 2000 and len({tuple(c) for c in cands}) == 4
        text, (answer, stale) = dec(ctx), (dec(cands[0]), dec(cands[1]))
        name = text.rsplit('\nassert ', 1)[1].split(' == ')[0]
        assert text.endswith(f"\nassert {name} == '") and text.count(f"{name} = ") == 1 + rebound
        first = text.index(f"{name} = '{stale if rebound else answer}'\n")
        assert abs(first / 2000 - 0.3) < 0.05 and text[first - 1] in ' \n'  # at a line's start, indented
        if rebound:
            assert abs(text.index(f"{name} = '{answer}'\n") / 2000 - 0.65) < 0.05
        outside = text[:first].rsplit('\n', 1)[0]  # the haystack: held-out text as it is
        assert outside.encode() in SOURCE.tobytes()


def test_needles_eval_reports_each_cell_beside_the_chance_level():
    model, ckpt = tiny('stdlib', block=64)
    fig = ev.needles_eval(model, ckpt, SOURCE, [1, 2], [0.5], trials=1, choices=3, seed=0, budget=4096)
    assert fig['chance'] == 1 / 3 and len(fig['cells']) == 4
    cells = {(c['variant'], c['context']) for c in fig['cells']}
    assert cells == {(v, n) for v in ('bound', 'rebound') for n in (64, 128)}
    assert all(0 <= c['acc'] + c['stale'] <= 1 and c['logprob'] < 0 for c in fig['cells'])
    with pytest.raises(ValueError, match='too few for haystacks'):
        ev.needles_eval(model, ckpt, SOURCE[:100], [2], [0.5], 1, 3, 0, 4096)


def test_the_command_line_appends_a_row_per_evaluation_with_its_provenance(tmp_path, monkeypatch, capsys):
    for name, dataset in (('syn', 'reassign'), ('lm', 'stdlib')):
        _, ckpt = tiny(dataset, block=32)
        os.makedirs(tmp_path / name)
        torch.save(ckpt, tmp_path / name / 'ckpt.pt')
    os.makedirs(tmp_path / 'text')
    from data.prepare import write_tokens
    write_tokens(str(tmp_path / 'text' / 'val.bin'), [SOURCE[:20000]], 256)
    out = tmp_path / 'r' / 'eval.jsonl'
    common = [f'--results={out}', "--tags={'task': 't', 'lr': 0.001}", '--multiples=[1, 2]', '--device=cpu']
    for args in ([f'--out_dir={tmp_path / "syn"}', '--what=length', '--length_seqs=16'],
                 [f'--out_dir={tmp_path / "lm"}', '--what=text,needles', f'--data_dir={tmp_path / "text"}',
                  '--text_windows=1', '--needle_trials=1', '--needle_depths=[0.5]', '--needle_choices=2']):
        monkeypatch.setattr(sys, 'argv', ['eval.py', *args, *common])
        runpy.run_path(os.path.join(ROOT, 'eval.py'), run_name='__main__')
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r['what'] for r in rows] == ['length', 'text', 'needles']
    for r in rows:
        assert r['command'].startswith('python eval.py --out_dir=') and r['date'][:2] == '20' and r['commit']
        assert (r['device'], r['mixer'], r['la_gate'], r['seed'], r['eval_seed'], r['task'], r['lr'], r['iter']) == (
            'cpu', 'eda', 'safe', 7, 0, 't', 0.001, 5) and r['checkpoint'].endswith('ckpt.pt')
    assert rows[0]['length'][1]['multiple'] == 2 and 'chance' in capsys.readouterr().out
    monkeypatch.setattr(sys, 'argv', ['eval.py', f'--out_dir={tmp_path}', '--what=length'])
    with pytest.raises(SystemExit, match='no checkpoint at'):
        runpy.run_path(os.path.join(ROOT, 'eval.py'), run_name='__main__')
    monkeypatch.setattr(sys, 'argv', ['eval.py', f'--out_dir={tmp_path / "syn"}', '--what=length', '--dtype=float16'])
    with pytest.raises(SystemExit, match="dtype must be 'auto', 'bfloat16' or 'float32', got 'float16'"):
        runpy.run_path(os.path.join(ROOT, 'eval.py'), run_name='__main__')  # not float32 in its place


LOCAL_TASKS = {  # lm_eval tasks from local JSON files: one per kind of request the adapter answers
    'choice': ('multiple_choice', 'doc_to_text: "{{q}}"\ndoc_to_choice: "{{c}}"\ndoc_to_target: "{{a}}"\n'
               'metric_list:\n  - metric: acc\n',
               [{'q': 'x = 1\ny = ', 'c': ['x', '2'], 'a': 0}, {'q': 'def f(', 'c': ['self', ')'], 'a': 1}]),
    'rolling': ('loglikelihood_rolling', 'doc_to_text: ""\ndoc_to_target: "{{t}}"\n'
                'metric_list:\n  - metric: word_perplexity\n',
                [{'t': 'import os\n' * 9}, {'t': 'def main():\n    pass\n'}]),
    'gen': ('generate_until', 'doc_to_text: "{{q}}"\ndoc_to_target: "{{a}}"\ngeneration_kwargs:\n  until: ["\\n"]\n'
            '  max_gen_toks: 4\nmetric_list:\n  - metric: exact_match\n',
            [{'q': 'a = ', 'a': '1'}]),
}


def test_the_harness_adapter_runs_tasks_made_of_local_json_files(tmp_path, monkeypatch):
    pytest.importorskip('lm_eval', reason='lm_eval is an optional dependency (pip install lm_eval)')
    from lm_eval.api.instance import Instance
    monkeypatch.setenv('HF_DATASETS_CACHE', str(tmp_path / 'hf'))
    monkeypatch.setenv('HF_DATASETS_OFFLINE', '1')
    for name, (kind, spec, docs) in LOCAL_TASKS.items():
        (tmp_path / f'{name}.jsonl').write_text(''.join(json.dumps(d) + '\n' for d in docs))
        (tmp_path / f'{name}.yaml').write_text(
            f'task: local_{name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n'
            f'    test: {tmp_path / name}.jsonl\ntest_split: test\noutput_type: {kind}\n{spec}')
    model, ckpt = tiny('stdlib', block=32)
    res = ev.harness_eval(model, ckpt, 'local_choice,local_rolling,local_gen', include=str(tmp_path))
    assert 0 <= res['local_choice']['acc,none'] <= 1 and res['local_rolling']['word_perplexity,none'] > 1
    assert res['local_gen']['exact_match,none'] in (0, 1)
    # its log-likelihood is the model's, the context truncated to the last block_size + 1 tokens
    lm = ev.harness_model()(model=model, ckpt=ckpt)
    ctx, cont = 'import sys\n' * 5, 'import os'
    [(lp, _)] = lm.loglikelihood([Instance('loglikelihood', {}, (ctx, cont), 0)])
    ids = list((ctx + cont).encode())[-33:]
    logp = F.log_softmax(model(torch.tensor([ids[:-1]]))[0][0], -1)[-len(cont):]
    assert abs(lp - logp.gather(1, torch.tensor(ids[-len(cont):])[:, None]).sum().item()) < 1e-4


def test_a_sweep_evaluates_each_run_where_it_trained_and_appends_the_rows_beside_its_results(tmp_path):
    task = ("--tasks={'reassign': {'config': 'config/reassign.py', 'x': 'block_size', 'levels': [[32, ["
            "'--num_kv_pairs=2', '--num_updates=2', '--vocab_size=64', '--block_size=32', '--n_embd=32', "
            "'--ffn_hidden=64', '--head_dim=16', '--la_head_dim=16', '--la_v_head_dim=16', '--la_gate_rank=4', "
            "'--la_erase_rank=4']]]}}")
    extra = "--extra=['--max_iters=2', '--eval_interval=2', '--eval_iters=1', '--batch_size=4', '--device=cpu']"
    p = subprocess.run([sys.executable, 'sweep.py', task, "--mixers={'eda': ['--mixer=eda']}", extra, '--seeds=[0]',
                        '--name=t', f'--results_dir={tmp_path}', f'--runs_dir={tmp_path / "runs"}',
                        '--checkpoints=True', "--evaluate=[['length', '--multiples=[1, 2]', '--length_seqs=16']]"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    [run] = [json.loads(line) for line in (tmp_path / 't.jsonl').read_text().splitlines()]
    [row] = [json.loads(line) for line in (tmp_path / 't_eval.jsonl').read_text().splitlines()]
    assert run['status'] == 'ok' and run['evaluated'] == [0]
    assert {k: row[k] for k in ('task', 'x', 'mixer', 'lr', 'seed', 'repeat', 'commit')} == {
        k: run[k] for k in ('task', 'x', 'mixer', 'lr', 'seed', 'repeat', 'commit')}
    assert [r['multiple'] for r in row['length']] == [1, 2] and row['checkpoint'].startswith(str(tmp_path / 'runs'))
