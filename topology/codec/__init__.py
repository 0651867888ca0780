"""The JSON codec: a snapshot to ``topolink.topology/v2`` text and back, refused whole when it does not
describe a machine.

  ``_json_codec``   ``to_dict``/``from_dict``, ``dumps``/``loads``, the schema names and the structure hash
  ``_jsontext``     indented JSON text without the ``json`` package (discover's ``-o``), held to ``json.dumps``
  ``_decode``       one decoder per model type, built once from its type hints
  ``_columns``      a list of records decoded a field at a time, each field's checks in C (a shortcut of ``_decode``)
  ``_hash``         the structure hash's text, written by msgspec where it writes what ``json.dumps`` writes
  ``_validate``     ``check``: ranges and counts a decoded snapshot must keep
  ``_references``   every id a snapshot refers to is one of its own
  ``_coherence``    facts that cannot all be true together
  ``_structure``    numbers and links that agree with the structure they describe, identities that name one thing

Imports: ``topology.model`` and ``topology.fabric`` (the capability and path rules that coherence applies).
Imported by: ``topology``'s names (``dumps``, ``loads``, ...), and the command line for ``coherent``.
Loads nothing on import: writing a snapshot must not pay for decoding one.
"""
