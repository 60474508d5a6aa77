import timeit
import statistics

from sympy import Rational, sieve
from sympy.core.cache import clear_cache

p = list(sieve.primerange(1, 10**4))


def setup():
    # Rational.__new__ is cached: every repeat builds its numbers afresh.
    clear_cache()


def workload():
    _ = [Rational(pi, 1000) for pi in p]


runtimes = timeit.repeat(workload, number=1, repeat=100, setup=setup)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
