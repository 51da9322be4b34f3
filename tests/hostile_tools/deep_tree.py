# A directory chain far deeper than Python's recursion limit and PATH_MAX, some levels mode 000:
# a recursive clean-up (shutil.rmtree) raises RecursionError on it.
def deep_tree(depth: int = 1500):
    import os
    for i in range(depth):
        os.mkdir("d")
        os.chdir("d")
        if i % 100 == 99:
            os.chmod(".", 0)
    return depth
