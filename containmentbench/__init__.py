"""ContainmentBench: trace-based evaluation of post-injection containment in tool-using agents.

The package follows the data flow of the benchmark (paper 000, §4): scenarios -> sandbox and
gateway -> runtime and model backends -> traces -> metrics -> analysis -> frozen tables.
"""

__version__ = "0.1.0"
