"""The folders the tests read, named once. Import these (`from tests.paths import REPO`);
conftest.py is pytest's to load, not a module to import from."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
PACKAGE = REPO / "kernelbench_v3"
PROBLEMS = REPO / "problems"
EXAMPLES = REPO / "examples" / "solutions"  # the honest example solutions
BENCHMARKS = REPO / "benchmarks"

SOLUTIONS = TESTS / "solutions"  # test solutions: hand-made kernels, cheats, broken files
ATTACKS = SOLUTIONS / "attacks"
TIMING_ATTACKS = SOLUTIONS / "timing_attacks"  # attacks on the supervisor's timing and evidence
CHEATS = SOLUTIONS / "cheats"
BROKEN = SOLUTIONS / "broken"
EXPECTED = TESTS / "expected"  # output shapes and dtypes per problem, from the spec
FIXTURES = TESTS / "fixtures"
RUNS_FIXTURES = FIXTURES / "runs"  # hand-made runs-dataset tables
PUBLISHED = RUNS_FIXTURES / "published_schema_fixture"
