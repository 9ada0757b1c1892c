"""Data safety: output folders we own, keyed tamper evidence, paths treated as data.

* ``outdir``: every ``--out`` refuses a folder it did not write, skips an identical result,
  and replaces its own output only with ``--force``, moving the old one aside (never deleting).
* ``keys``: HMAC-SHA256 authentication with a key kept outside the study (env or key file).
* ``paths``: study names and ``results_dir`` checked before they reach a shell or a folder.
"""
