"""``mucode study``: the paper's ablations as seeded grids of real mucode runs on a toy task, with a report.

- :mod:`mucode.study.base`: the study task's base policy, built by supervised learning, cached per seed;
- :mod:`mucode.study.heldout`: the current policy's reward on the held-out prompts every N updates;
- :mod:`mucode.study.grid`: the built-in studies (variants as config overrides);
- :mod:`mucode.study.runner`: the grid run in worker processes, resumable;
- :mod:`mucode.study.report`: mean ± std over seeds, the collapse rule, the plot and the table.

docs/study.md describes the task and what a toy cannot show.
"""
