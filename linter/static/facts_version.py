"""The version of the project facts (`modellint.static.facts`) and of their cache entries: in
a module of its own, so that a rerun that only checks the cache's keys imports no extraction."""

FACTS_VERSION = 9  # 3: notebooks have facts (their imports make their cache keys); 4: defaults, steps, registers
# 5: a file that does not parse has the facts of what does; 6: zeroes and invokes (the effects of
# project functions at their call sites); 7, 8: no_grad (a function that runs under no_grad),
# dicts, comprehensions, arithmetic, slices, joins of names assigned several times, containers
# changed after they are built (`mutates`), classes defined in functions, a returned name is its
# last plain assignment; 9: summaries are dataclasses in memory (the same JSON, now decoded)
