import timeit
import statistics

from sympy import Q, Symbol, ask
from sympy.core.cache import clear_cache

x = Symbol('x')


def setup():
    clear_cache()


def workload():
    ask(Q.real(x), Q.positive(x))


runtimes = timeit.repeat(workload, number=1, repeat=100, setup=setup)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
