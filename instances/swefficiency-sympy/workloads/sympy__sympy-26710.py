import timeit
import statistics

from sympy.ntheory.generate import _primepi


def workload():
    _primepi(10**6)


runtimes = timeit.repeat(workload, number=1, repeat=100)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
