"""Data safety: one write path, frozen studies, keyed tamper evidence, paths treated as data.

* ``writer``: the only module that writes, renames or deletes files: atomic, owned (ownership
  records), never deleting what it did not create; a tested rule (tests/integrity).
* ``frozen``: what a study's ``MANIFEST.json`` covers, the journal of rebuilt outputs, and the
  check that an intermediate cache is the frozen or a verb-rebuilt one before use.
* ``keys``: HMAC-SHA256 authentication with a key kept outside the study (env or key file).
* ``paths``: study names and ``results_dir`` checked before they reach a shell or a folder.
"""
