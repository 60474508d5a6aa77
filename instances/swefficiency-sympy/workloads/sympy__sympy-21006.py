import timeit
import statistics

from sympy import Matrix


def workload():
    _ = Matrix.eye(100, 100)
    _ = Matrix.zeros(100, 100)


runtimes = timeit.repeat(workload, number=1, repeat=50)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
