"""
Prepare token files for train.py: <out>/train.bin, <out>/val.bin and <out>/meta.json (all git-ignored).

    python data/prepare.py stdlib | fineweb_edu | openwebtext | text --input=FILES --name=mytext [--encoding=gpt2]

then `python train.py --dataset=<name>` (data/<name>/, or a path with a '/'). stdlib and text need no network;
the hub corpora and tiktoken encodings download on first use (tiktoken caches its files, in TIKTOKEN_CACHE_DIR if
set). Token files: format in notes/train.md; load_tokens() checks them, naming the command that rebuilds one.

Validation (--val_fraction, in (0, 0.5]): whole files or documents by a stable hash of their name, or, with too few
files for that (val_names), the last val_fraction of every file, so that it follows the training text's distribution.
"""
import argparse
import codecs
import contextlib
import glob
import json
import os
import platform
import signal
import struct
import sys
import sysconfig
import urllib.error
import urllib.request
import zlib

import numpy as np
from tqdm import tqdm

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION, HEADER_BYTES = b"EDATOKS\0", 1, 64
HEADER = struct.Struct("<8sIIQQ")  # magic, version, itemsize, vocab_size, n_tokens (32 bytes, then zeros)
DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32}
MAX_VOCAB = 1 << 22  # 20x the largest tiktoken vocab (o200k): a header claiming more is damaged, not a corpus
MIN_VAL_FILES = 10   # fewer held-out files would make a validation set unlike the training text
# name: (hub repo, subset, split, default encoding)
HUB = {"fineweb_edu": ("HuggingFaceFW/fineweb-edu", "sample-10BT", "train", "gpt2"),
       "openwebtext": ("Skylion007/openwebtext", None, "train", "gpt2")}


class TokenFileError(Exception):
    """A token file is missing, truncated or does not match what the run expects."""


# Token files --------------------------------------------------------------------------------------
def write_tokens(path, arrays, vocab_size, total=None, desc=None):
    """Write an iterable of 1-D token arrays to `path`; returns (n_tokens, unigram counts). Written to a temp file
    renamed at the end, so an interrupted preparation never leaves a file that looks complete."""
    if not 1 <= vocab_size <= MAX_VOCAB:
        raise ValueError(f"vocab_size {vocab_size} is outside [1, {MAX_VOCAB}] while writing {path}")
    itemsize = 1 if vocab_size <= 2**8 else 2 if vocab_size <= 2**16 else 4
    counts, n = np.zeros(vocab_size, dtype=np.int64), 0
    tmp = f"{path}.tmp{os.getpid()}"  # per process: two preparations at once cannot mix their bytes
    with removed_unless_done(tmp), open(tmp, "wb") as f:
        f.write(b"\0" * HEADER_BYTES)
        for arr in tqdm(arrays, total=total, desc=desc or os.path.basename(path), unit="shard", leave=False):
            arr = np.asarray(arr)
            if arr.size and arr.max() >= vocab_size:
                raise ValueError(f"token {int(arr.max())} >= vocab_size {vocab_size} while writing {path}")
            counts += np.bincount(arr, minlength=vocab_size)
            f.write(arr.astype(DTYPES[itemsize]).tobytes())
            n += arr.size
        f.seek(0)
        f.write(HEADER.pack(MAGIC, VERSION, itemsize, vocab_size, n))
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, path)
    return n, counts


@contextlib.contextmanager
def removed_unless_done(tmp):
    """Remove `tmp` if the block is left by an error or an interrupt (Ctrl-C, or SIGTERM: main() makes it one)."""
    try:
        yield
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def rebuild_command(data_dir):
    """The command that (re)builds the token files of `data_dir`, as written in its meta.json."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(os.path.join(data_dir, "meta.json")) as f:
            command = json.load(f)["command"]
        if isinstance(command, str):
            return command
    if (name := os.path.basename(os.path.normpath(data_dir))) == "stdlib" or name in HUB:
        return f"python data/prepare.py {name}"
    return f"python data/prepare.py text --input=<your text files> --out={data_dir}"


def load_tokens(path, vocab_size=None):
    """Open a token file after checking its header and size: (a read-only numpy memmap, the header's vocab size).
    vocab_size: if given, the file's must equal it (train.bin and val.bin agree). Raises TokenFileError naming
    the file and the command that rebuilds it."""
    fix = f"rebuild it with: {rebuild_command(os.path.dirname(path))}"
    if not os.path.exists(path):
        raise TokenFileError(f"token file {path} is missing; {fix}")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(HEADER.size)
    if size < HEADER_BYTES or len(head) < HEADER.size:
        raise TokenFileError(f"token file {path} is truncated ({size} bytes, shorter than its header); {fix}")
    magic, version, itemsize, vocab, n = HEADER.unpack(head)
    if magic != MAGIC:
        raise TokenFileError(f"token file {path} is not a nanoEDA token file (bad magic {magic!r}); {fix}")
    if version != VERSION:
        raise TokenFileError(f"token file {path} has format version {version}, this code reads {VERSION}; {fix}")
    if itemsize not in DTYPES:
        raise TokenFileError(f"token file {path} has an unknown token size of {itemsize} bytes; {fix}")
    if not 1 <= vocab <= (most := min(MAX_VOCAB, 2 ** (8 * itemsize))):  # (a model is built with this vocab)
        raise TokenFileError(f"token file {path} claims vocab size {vocab:,}, outside [1, {most:,}] for "
                             f"{itemsize}-byte tokens: a damaged header; {fix}")
    if size != (expected := HEADER_BYTES + n * itemsize):
        raise TokenFileError(f"token file {path} is {'truncated' if size < expected else 'longer than its header says'}"
                             f": {size} bytes, the header's {n} tokens need {expected}; {fix}")
    if vocab_size is not None and vocab != vocab_size:
        raise TokenFileError(f"token file {path} has vocab size {vocab}, expected {vocab_size}; {fix}")
    if n == 0:
        raise TokenFileError(f"token file {path} holds no tokens; {fix}")
    tokens = np.memmap(path, dtype=DTYPES[itemsize], mode="r", offset=HEADER_BYTES, shape=(n,))
    # an id >= vocab would index past the embedding (a device-side assert on a GPU, mid-run): one pass over
    # the file (~0.05 s per GB from the page cache, else disk speed), skipped when the dtype cannot hold one
    if np.iinfo(tokens.dtype).max >= vocab and int(tokens.max()) >= vocab:
        raise TokenFileError(f"token file {path} holds token id {int(tokens.max())}, outside its header's vocab "
                             f"size {vocab}; {fix}")
    return tokens, vocab


META_FIELDS = dict(vocab_size=("an int", int), encoding=("a string", str), command=("a string", str),
                   unigram_entropy=("a number", (int, float)), train_tokens=("an int", int), val_tokens=("an int", int))


def dataset_dir(name):
    return name if os.sep in name or '/' in name else os.path.join(DATA_DIR, name)


def read_meta(data_dir):
    """meta.json's fields ({} without a readable one: the token files' headers are what a run needs). A field
    of the wrong type (a hand-edited or damaged file) exits with one line naming it and the rebuild command."""
    path = os.path.join(data_dir, "meta.json")
    fix = f"rebuild it with: {rebuild_command(data_dir)}"
    try:
        with open(path) as f:
            meta = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise SystemExit(f"{path} cannot be read as JSON ({err}); {fix}") from None
    if not isinstance(meta, dict):
        raise SystemExit(f"{path} is not a JSON object; {fix}")
    for field, (what, kind) in META_FIELDS.items():
        if field in meta and (not isinstance(meta[field], kind) or isinstance(meta[field], bool)):  # bool: no int
            raise SystemExit(f"{path}: {field} is {meta[field]!r}, not {what}; {fix}")
    return meta


def finish(out, splits, vocab_size, encoding, command, extra=None):
    """Write train.bin / val.bin from {split: (iterable of arrays, count)} and meta.json. Returns meta."""
    os.makedirs(out, exist_ok=True)
    meta = dict(vocab_size=vocab_size, encoding=encoding, command=command, **(extra or {}))
    for split, (arrays, total) in splits.items():
        n, counts = write_tokens(os.path.join(out, f"{split}.bin"), arrays, vocab_size, total, desc=split)
        meta[f"{split}_tokens"] = n
        if split == "train":  # the loss a model that ignores context reaches: the reference for training
            p = counts[counts > 0] / n
            meta["unigram_entropy"] = float(-(p * np.log(p)).sum())  # nats/token, the loss's unit
    tmp = os.path.join(out, f"meta.json.tmp{os.getpid()}")
    with removed_unless_done(tmp):
        with open(tmp, "w") as f:
            json.dump(meta, f, indent=1)
        os.replace(tmp, os.path.join(out, "meta.json"))
    print(f"wrote {out}: " + ", ".join(f"{s} {meta[f'{s}_tokens']:,} tokens" for s in splits)
          + f", vocab {vocab_size}, unigram entropy {meta['unigram_entropy']:.4f} nats/token")
    return meta


def is_val(name, val_fraction):
    """Deterministic split by name: a stable hash, independent of file order, machine and Python run."""
    return zlib.crc32(name.encode()) % 10_000 < val_fraction * 10_000


def val_names(names, val_fraction):
    """The names of the files held out whole for validation, or None when the hash holds out fewer than
    MIN_VAL_FILES (or all): then every file's tail is validation (tail_split)."""
    val = {n for n in names if is_val(n, val_fraction)}
    return val if MIN_VAL_FILES <= len(val) < len(names) else None


def tail_split(text, val_fraction):
    """(head, tail) of a str or bytes: the tail, at least one element, is the last val_fraction of it."""
    cut = len(text) - max(1, round(len(text) * val_fraction))
    return text[:max(cut, 0)], text[max(cut, 0):]


def check_out(out):
    if os.path.exists(out) and not os.path.isdir(out):
        raise SystemExit(f"prepare: --out={out} is an existing file, not a folder: give a folder for "
                         f"train.bin, val.bin and meta.json")


# Tokenizers ---------------------------------------------------------------------------------------
class ByteEncoding:
    """The byte encoding, with the tiktoken.Encoding attributes the scripts use: a token is a byte of the UTF-8
    text, and byte 0 (never in text) ends a document."""
    n_vocab, eot_token = 256, 0

    def encode_ordinary(self, text):
        return list(text.encode("utf-8"))

    encode = encode_ordinary  # (no special tokens to refuse)

    def encode_ordinary_batch(self, texts):
        return [list(t.encode("utf-8")) for t in texts]

    def decode_bytes(self, ids):
        return bytes(ids)

    def decode(self, ids):
        return bytes(ids).decode("utf-8", "replace")


def load_tokenizer(encoding, prog):
    """`encoding`'s tokenizer (ByteEncoding for 'bytes', else tiktoken's), or an exit naming `prog` and what to do."""
    if encoding == "bytes":
        return ByteEncoding()
    if encoding.startswith("synthetic"):
        raise SystemExit(f"{prog}: a model of a synthetic task ({encoding}) reads no text")
    import tiktoken  # optional: only the tiktoken encodings need it
    try:
        return tiktoken.get_encoding(encoding)
    except Exception as err:
        raise SystemExit(f"{prog}: tiktoken could not load the encoding '{encoding}' ({type(err).__name__}: {err}).\n"
                         f"tiktoken downloads its BPE files on first use: run once with network access, or point "
                         f"TIKTOKEN_CACHE_DIR at a folder that holds them, or use --encoding=bytes.") from None


# Sources ------------------------------------------------------------------------------------------
def prepare_stdlib(out=os.path.join(DATA_DIR, "stdlib"), val_fraction=0.02):
    """Byte-level corpus of the running Python's stdlib source (*.py, site-packages excluded), in a few seconds."""
    check_out(out)
    root, files = sysconfig.get_paths()["stdlib"], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__"))
        files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    if not files:
        raise SystemExit(f"prepare: no *.py files under {root}: this Python has no stdlib source to train on")
    val = val_names([os.path.relpath(p, root) for p in files], val_fraction)
    parts = {"train": [], "val": []}
    for path in files:
        with open(path, "rb") as f:
            data = f.read().replace(b"\0", b"")  # byte 0 is the document separator
        pieces = (zip(("train", "val"), tail_split(data, val_fraction)) if val is None
                  else [("val" if os.path.relpath(path, root) in val else "train", data)])
        for split, piece in pieces:
            parts[split].append(np.frombuffer(piece + b"\0", np.uint8))
    return finish(out, {s: (a, len(a)) for s, a in parts.items()}, 256, "bytes",
                  f"python data/prepare.py stdlib --out={os.path.relpath(out)}",
                  dict(source=root, python=platform.python_version(), files=len(files),
                       **(dict(val_files=len(val)) if val else dict(val_split="every file's tail"))))


def tokenize_dataset(ds, encoding, num_proc, out, command, extra=None):
    """Tokenize a datasets.Dataset with a 'split' column into train/val files, in parallel."""
    enc = load_tokenizer(encoding, "prepare")
    dtype = np.uint8 if enc.n_vocab <= 256 else np.uint32

    def encode(batch):  # each document's ids, then the end-of-document token
        return {"ids": [np.array(ids + [enc.eot_token], dtype) for ids in enc.encode_ordinary_batch(batch["text"])]}
    ds = ds.map(encode, batched=True, remove_columns=[c for c in ds.column_names if c != "split"], num_proc=num_proc,
                desc=f"tokenizing ({encoding})")
    splits = {}
    for split in ("train", "val"):
        part = ds.filter(lambda b: [s == split for s in b["split"]], batched=True, num_proc=num_proc,
                         desc=f"selecting {split}")
        if len(part) == 0:
            raise SystemExit(f"prepare: the {split} split is empty: give more documents or change --val_fraction")
        shards = max(1, min(1024, len(part) // 1000))

        def arrays(part=part, shards=shards):  # one shard at a time keeps memory flat
            for i in range(shards):
                shard = part.shard(shards, i, contiguous=True).with_format("numpy")
                yield np.concatenate(list(shard["ids"]))
        splits[split] = (arrays(), shards)
    return finish(out, splits, enc.n_vocab, encoding, command, extra)


def hub_reachable(timeout=5.0):
    """One request to the Hugging Face Hub (through the environment's proxy, as the hub client goes): None
    when it answers, else why not."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return None  # it answered (with an error status): reachable
    except (OSError, ValueError) as err:
        return f"{endpoint} is unreachable ({getattr(err, 'reason', err)})"
    return None


def prepare_hub(name, out, encoding=None, num_proc=None, val_fraction=0.0005):
    check_out(out)
    # offline, the hub client retries for ~25 s before failing: ask once, and if nothing answers read only
    # the local cache (set before datasets is imported, which reads these once)
    if not os.environ.get("HF_HUB_OFFLINE") and (why := hub_reachable()):
        print(f"prepare: {why}; looking in the local Hugging Face cache only")
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets
    repo, subset, split, default_enc = HUB[name]
    encoding = encoding or default_enc
    try:
        ds = datasets.load_dataset(repo, subset, split=split, num_proc=num_proc)
    except Exception as err:
        raise SystemExit(f"prepare: could not load {repo}{'/' + subset if subset else ''} from the Hugging Face Hub "
                         f"({type(err).__name__}: {str(err)[:300]}).\nIt needs network access to huggingface.co "
                         f"(or a local HF cache with HF_DATASETS_OFFLINE=1). Offline, train on the built-in corpus "
                         f"(python train.py) or on your own files:\n"
                         f"  python data/prepare.py text --input=<files or folder> --name=mytext") from None
    # deterministic split: the same documents go to val on every machine
    ds = ds.add_column("split", ["val" if is_val(str(i), val_fraction) else "train" for i in range(len(ds))])
    return tokenize_dataset(ds, encoding, num_proc, out, f"python data/prepare.py {name} --encoding={encoding}")


def text_files(inputs, exts):
    files = []
    for item in inputs:
        if os.path.isdir(item):
            for dirpath, dirnames, filenames in os.walk(item):
                dirnames.sort()
                files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.rsplit(".", 1)[-1] in exts]
        else:
            if not (matches := sorted(glob.glob(item))):
                raise SystemExit(f"prepare: no file matches --input={item}")
            files += matches
    if not files:
        raise SystemExit(f"prepare: no text files (*.{', *.'.join(exts)}) under {', '.join(inputs)}")
    return files


def check_text_file(path):
    """Exit naming `path` unless it is text: readable, UTF-8 (what the text loader reads), no NUL byte (the
    byte encoding's end of document; in a file, a sign of binary data). Read in 1 MiB pieces."""
    decoder, pos, held, problem = codecs.getincrementaldecoder("utf-8")(), 0, 0, None
    try:
        with open(path, "rb") as f:
            while piece := f.read(1 << 20):
                if (nul := piece.find(b"\0")) >= 0:
                    problem = f"a NUL byte at byte {pos + nul}: binary data, not text"
                    break
                held = len(decoder.getstate()[0])  # bytes of a character cut by the previous piece
                decoder.decode(piece)
                pos += len(piece)
            else:
                held = len(decoder.getstate()[0])
                decoder.decode(b"", final=True)
    except UnicodeDecodeError as err:
        problem = f"not UTF-8 text: {err.reason} at byte {pos - held + err.start}"
    except OSError as err:
        problem = f"cannot be read: {err.strerror}"
    if problem:
        raise SystemExit(f"prepare: {path}: {problem}; convert it to UTF-8 text or leave it out of --input")


def prepare_text(inputs, out, encoding="bytes", num_proc=None, val_fraction=0.02, exts=("txt", "md", "py")):
    """Local text files or folders through datasets' text loader, one document per file (validation: val_names)."""
    check_out(out)
    files = text_files(inputs, exts)
    for path in files:
        check_text_file(path)
    import datasets
    load_tokenizer(encoding, "prepare")  # fail early (and clearly) if the tokenizer cannot be loaded
    val = val_names([os.path.basename(f) for f in files], val_fraction)
    load = lambda fs: datasets.load_dataset("text", data_files=fs, sample_by="document", split="train")
    if val is None:  # each file's head to train, its tail to val (an empty piece is left out)
        def cut(batch):
            pieces = [(s, p) for t in batch["text"] for s, p in zip(("train", "val"), tail_split(t, val_fraction)) if p]
            return {"text": [p for _, p in pieces], "split": [split for split, _ in pieces]}
        ds = load(files)
        ds = ds.map(cut, batched=True, remove_columns=ds.column_names, desc="cutting each file's tail for val")
    else:
        parts = [load([f for f in files if (os.path.basename(f) in val) == (split == "val")])
                 for split in ("train", "val")]
        ds = datasets.concatenate_datasets([d.add_column("split", [split] * len(d))
                                            for split, d in zip(("train", "val"), parts)])
    command = (f"python data/prepare.py text {' '.join('--input=' + i for i in inputs)} "
               f"--out={out} --encoding={encoding}")
    how = dict(val_split="every file's tail") if val is None else dict(val_files=len(parts[1]))
    return tokenize_dataset(ds, encoding, num_proc, out, command, extra=dict(files=len(files), **how))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", choices=["stdlib", "text", *HUB])
    parser.add_argument("--input", action="append", default=[], help="text: a file, folder or glob (repeat)")
    parser.add_argument("--name", help="output folder data/<name> (default: the source's name)")
    parser.add_argument("--out", help="output folder (overrides --name)")
    parser.add_argument("--encoding", help="'bytes' or a tiktoken encoding, e.g. gpt2 (default: bytes for stdlib "
                        "and text, gpt2 for the hub corpora)")
    parser.add_argument("--num_proc", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--val_fraction", type=float, help="share of documents held out for val")
    parser.add_argument("--ext", default="txt,md,py", help="text: file extensions taken from folders")
    args = parser.parse_args()
    out = args.out or os.path.join(DATA_DIR, args.name or args.source)
    vf = {} if args.val_fraction is None else {"val_fraction": args.val_fraction}
    if args.val_fraction is not None and not 0 < args.val_fraction <= 0.5:  # (NaN fails too)
        sys.exit(f"prepare: --val_fraction must be in (0, 0.5] (a share held out from training), "
                 f"got {args.val_fraction}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a scheduler's stop: as Ctrl-C, files cleaned up
    try:
        if args.source == "stdlib":
            if args.encoding not in (None, "bytes"):
                sys.exit("prepare: the stdlib corpus is byte-level; drop --encoding")
            prepare_stdlib(out, **vf)
        elif args.source == "text":
            if not args.input:
                sys.exit("prepare: text needs --input=<file, folder or glob> (repeatable)")
            prepare_text(args.input, out, args.encoding or "bytes", args.num_proc, exts=tuple(args.ext.split(",")),
                         **vf)
        else:
            prepare_hub(args.source, out, args.encoding, args.num_proc, **vf)
    except KeyboardInterrupt:
        sys.exit(f"prepare: interrupted; nothing half-written is left in {out} (files it had finished stay)")
