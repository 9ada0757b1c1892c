"""Writing a study's manifest: what a freeze checks before it signs (paper 000 §6.6).

A freeze accounts for every covered byte against the manifest it replaces and signs the new
one (``seal``); the manifest it replaces is the folder's ``MANIFEST.json`` or its copy, or,
for a keyed study whose folder lost both, this machine's record of the study's last freeze
(``integrity/heads.py``), so deleting the manifests resets neither the identity nor the
counter. It refuses, naming the first problem:

* a covered file changed and not the latest output of a verb on the study's journal chain
  since the old manifest (``integrity/frozen.unaccounted``), and any break of that chain;
* with a key: an old manifest whose MAC fails (one written without a key needs
  ``freeze --key``), one older than the last freeze this machine saw of the study, or of
  another study, a journal cut back below the last line this machine appended, and a folder
  whose traces are those of a keyed study whose own folder no longer holds it (a study
  re-frozen from scratch; ``--new-identity`` starts a new identity deliberately).

The new manifest carries the study's identity (``study_id``: random at its first freeze,
kept after), its freeze counter, the previous manifest's sha256 and the journal position
it was written at (``journal``: the chain continues from there); with a key one HMAC over
the whole, and this machine's record of the study moves on.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError, VerifyError
from containmentbench.integrity import frozen, heads, journal, reading
from containmentbench.integrity.keys import ALG, key_id, load_key, mac

MANIFEST = frozen.MANIFEST


def _old_manifest(root: Path, key: bytes | None, new_identity: bool
                  ) -> tuple[tuple[dict[str, Any], str] | None, heads.Head | None, list[str]]:
    """The manifest a freeze of ``root`` replaces, this machine's record of the study, and
    the problems found on the way."""
    old = frozen.manifest_of(root)
    if key is None or new_identity:
        return old, None, []
    rec, bad = heads.for_folder(root, key)
    problems = [f"this machine's record {b}" for b in bad]
    if old is None and rec is not None:
        copy = rec.manifest()
        if copy is None:
            problems.append(f"this folder held study {rec.study_id} (freeze {rec.freeze}, "
                            f"this machine's record), whose manifest copy is gone")
        else:
            from containmentbench.integrity import writer

            # the study is frozen in its folder again (readers, and verbs that rebuild with
            # --force, see it so), whatever this freeze decides
            writer.write_bytes(root / frozen.HEAD, copy[2], kind="manifest")
            old = frozen.manifest_of(root) or (copy[0], copy[1])
            print(f"freeze: {MANIFEST} and {frozen.HEAD} are missing; study {rec.study_id} "
                  f"continues from this machine's record of freeze {rec.freeze} (its manifest "
                  f"is put back as {frozen.HEAD})", file=sys.stderr)
    return old, rec, problems


def _orphans(files: dict[str, str], key: bytes) -> list[heads.Head]:
    """Records of keyed studies with exactly these traces whose folder no longer holds
    them (moved, or its manifests deleted)."""
    if not any(k.startswith("traces/") for k in files):
        return []
    out = []
    for rec in heads.by_traces(heads.traces_digest(files), key):
        there = frozen.manifest_of(Path(rec.doc["folder"]))
        if there is None or there[0].get("study_id") != rec.study_id:
            out.append(rec)  # else a twin or a copy: that study is still frozen where it was
    return out


def _from_scratch(root: Path, files: dict[str, str], key: bytes) -> list[str]:
    """A first freeze with a key: the traces must not be those of a keyed study frozen
    elsewhere whose folder no longer holds it."""
    out = []
    for rec in _orphans(files, key):
        out.append(f"these traces are those of study {rec.study_id} (freeze {rec.freeze} in "
                   f"{rec.doc['folder']}, this machine's record), which that folder no longer "
                   f"holds: restore its {MANIFEST}, or start a new identity deliberately "
                   f"with containmentbench freeze {root} --new-identity")
    return out


def _cut_back(rec: heads.Head | None, doc: dict[str, Any], chain: journal.Chain) -> list[str]:
    """The journal must still hold the last line this machine appended to it."""
    if rec is None or rec.study_id != doc.get("study_id"):
        return []
    seq, head = rec.journal
    if seq <= journal.anchor(doc)[0] or chain.seen.get(seq) == head:
        return []
    return [f"{frozen.JOURNAL} was cut back: it no longer holds line {seq}, the last this "
            f"machine appended (a rebuild removed from the record of the study)"]


def seal(root: Path, manifest: dict[str, Any], files: dict[str, str],
         new_identity: bool = False, rekey: bool = False) -> dict[str, Any]:
    """Check the folder's earlier manifest, then write the new one (see the module text).
    ``new_identity``: start a new study identity at freeze 1 (this folder's records are set
    aside). ``rekey``: the old manifest was written without a key and is checked by its
    hashes only (``freeze --key``)."""
    from containmentbench.integrity import writer

    root = Path(root)
    key = load_key(root)
    old, rec, bad = _old_manifest(root, key, new_identity)
    counter, previous = 1, None
    study_id = secrets.token_hex(16)
    raw = frozen.read_journal(root)
    if old is not None and not new_identity:
        doc, digest = old
        if key is not None and not rekey:
            bad = reading.check_mac(key, doc) + bad
            bad += reading.head_problems(root, doc, digest, key) if rec is not None else []
        ch = journal.follow(raw, doc, digest, key)
        bad += ch.problems  # a broken chain first: nothing after the break is accounted
        bad += _cut_back(rec, doc, ch) if key is not None and not ch.problems else []
        bad += [p for p in frozen.unaccounted(root, files, old, key) if p not in ch.problems]
        counter = int(doc.get("freeze") or 1) + 1
        previous = digest
        study_id = doc.get("study_id") or study_id
        at = (ch.seq, ch.head)
    else:
        if key is not None and not new_identity:
            bad += _from_scratch(root, files, key)
        at = (journal.follow(raw, None, None, None).top, journal.genesis(study_id))
    if bad:
        raise VerifyError(f"refusing to re-freeze: {bad[0]} ({len(bad)} problem(s); "
                          f"restore the file, or rebuild it with its verb and --force)",
                          file=str(root / MANIFEST))
    if new_identity:
        # this folder's earlier identity, and the identity its traces carried where that
        # folder no longer holds it: settled, set aside (kept)
        orphans = [Path(r.doc["folder"]) for r in _orphans(files, key)] if key else []
        for folder in [root, *orphans]:
            for p in writer.retire_heads(folder):
                print(f"freeze: set this machine's record of an earlier identity aside ({p})",
                      file=sys.stderr)
    manifest = {**manifest, "files": files, "freeze": counter, "previous": previous,
                "study_id": study_id, "journal": {"seq": at[0], "head": at[1]}}
    if key is not None:
        manifest["auth"] = {"alg": ALG, "key_id": key_id(key),
                            "mac": mac(key, "manifest", manifest)}
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    writer.write_text(root / frozen.HEAD, text, kind="manifest")
    writer.write_text(root / MANIFEST, text, kind="manifest")
    if key is not None:
        sha = hashlib.sha256(text.encode()).hexdigest()
        writer.write_head(root, heads.make(study_id, root, counter, sha, at[0], at[1],
                                           heads.traces_digest(files), key), text.encode())
    return manifest


def key_study(root: Path, manifest: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """``freeze --key``: key a study frozen without one. Its manifest must hold (every file
    as frozen or rebuilt on its chain, checked by hashes: there was no key); the new freeze
    is signed, journalled as the keying, and recorded on this machine."""
    root = Path(root)
    key = load_key(root)
    if key is None:
        raise BenchError("--key needs a key: set CONTAINMENTBENCH_KEY_FILE to a file outside "
                         "the study holding at least 16 bytes (or CONTAINMENTBENCH_KEY to the "
                         "key itself), then run this command again", field="key")
    old = frozen.manifest_of(root)
    if old is None:
        raise BenchError(f"no {MANIFEST}: the study is not frozen (containmentbench freeze "
                         f"with the key set freezes and keys it at once)", file=str(root))
    if isinstance(old[0].get("auth"), dict):
        raise BenchError(f"{MANIFEST} is keyed already (key id "
                         f"{old[0]['auth'].get('key_id')!r}); a study is keyed once",
                         file=str(root / MANIFEST))
    from containmentbench.integrity import writer

    with writer.journal_locked(root) as j:  # the keying, on the study's chain
        j.append([(root / MANIFEST, "key", old[1], None)])
    return seal(root, manifest, files, rekey=True)
