"""Provenance: a record beside every output, in the open provenance manifest format, and lineage.

- :mod:`.capture`: what one operation call read and which justifications let it run;
- :mod:`.record`: the record of one output, written as its sidecar and committed with it;
- :mod:`.conformance`: the format's rules, to check every record (ours and any other producer's);
- :mod:`.lineage`: from a file's bytes back to the originals it was made from.
"""
