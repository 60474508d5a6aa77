import timeit
import statistics

from sympy.ntheory import legendre_symbol

a = 87345678298376536798
p = 957496696762772407663


def workload():
    legendre_symbol(a, p)


runtimes = timeit.repeat(workload, number=1, repeat=1000)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
