"""A Hypothesis profile for the model's long searches: ``--hypothesis-profile=noshrink`` reports the first
failing run as found, without shrinking it (a shrink of a long run can take longer than the search). With
``--hypothesis-seed`` it replays one search: the seeds of ``docs/reliability.md`` were found so."""

from hypothesis import Phase, settings

settings.register_profile("noshrink", phases=[Phase.explicit, Phase.reuse, Phase.generate], database=None)
