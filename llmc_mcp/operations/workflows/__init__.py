"""Guided workflows: the server leads an agent through multi-step work, one instruction per call.

``definitions`` (models and YAML loading), ``templates`` (the substitution language), ``validate``
(graph and template checks), ``state`` (persisted runs), ``engine`` (start and submit), ``service``
(how operation code reaches the engine), ``operations`` (the catalog's ``workflows`` namespace),
``builtin/`` (the shipped definitions). Nothing is imported here: the catalog imports ``service``
while the operations package is still loading.
"""
