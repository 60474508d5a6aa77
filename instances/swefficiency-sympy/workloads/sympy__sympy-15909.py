import timeit
import statistics

from sympy import trailing


def workload():
    for k in range(1, 200):
        trailing(2**k + 2**(k - 1))


runtimes = timeit.repeat(workload, number=1, repeat=1000)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
