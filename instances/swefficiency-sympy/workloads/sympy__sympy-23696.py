import timeit
import statistics

from sympy import Symbol
from sympy.integrals.manualintegrate import manualintegrate

x = Symbol('x')


def workload():
    manualintegrate(x, x)


runtimes = timeit.repeat(workload, number=1, repeat=1000)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
