# A directory chain far deeper than Python's recursion limit and PATH_MAX, some levels mode 000:
# a recursive clean-up (shutil.rmtree) raises RecursionError on it. A level is closed (mode 000)
# once the tool stands below it: without a capability (CAP_DAC_OVERRIDE) no process, root
# included, may create anything in a mode-000 directory.
def deep_tree(depth: int = 1500):
    import os
    for i in range(depth):
        os.mkdir("d")
        os.chdir("d")
        if i % 100 == 99:
            try:
                os.chmod("..", 0)
            except PermissionError:  # no jail: the syscall filter refuses chmod
                pass
    return depth
