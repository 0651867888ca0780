"""The harness: plan, child processes with budgets, runner, report and the entry points."""
