import timeit
import statistics

from sympy import Mul, symbols
from sympy.core.cache import clear_cache


def setup():
    # A fresh Mul per repeat: its assumptions are cached on the object.
    global m
    clear_cache()
    m = Mul(*symbols('x:1000'))


def workload():
    m.is_zero


runtimes = timeit.repeat(workload, number=1, repeat=10, setup=setup)

print("Mean:", statistics.mean(runtimes))
print("Std Dev:", statistics.stdev(runtimes))
