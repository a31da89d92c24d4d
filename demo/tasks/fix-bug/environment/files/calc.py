import sys


def add(a, b):
    return a + bb


print(add(int(sys.argv[1]), int(sys.argv[2])))
