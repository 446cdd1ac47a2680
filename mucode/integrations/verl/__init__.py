"""mucode inside verl (0.9.1), the multi-node engine: everything verl-specific lives here.

- :mod:`.register`: importing it registers mucode's ``mu_grpo`` and ``m2po`` in verl's policy-loss
  registry; verl imports it in every worker through
  ``VERL_USE_EXTERNAL_MODULES=mucode.integrations.verl.register``;
- :mod:`.losses`: those losses, in verl's ``PolicyLossFn`` signature;
- :mod:`.reward`: verl's ``custom_reward_function``, scoring through mucode's verifier (loaded by path);
- :mod:`.config`: ``mucode verl-config``'s config file, command line and Parquet data;
- :mod:`.commands`: the ``mucode verl-config`` command.

Importing this package imports nothing (verl is only needed by ``register``, ``losses`` and the
run itself); see docs/verl.md.
"""
