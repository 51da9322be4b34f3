# Names that are not UTF-8, mode-000 files and directories (the call's own folder too), fifos,
# thousands of files, and links (refused by the audit hook; made when it is bypassed).
def odd_entries():
    import os
    made = []
    os.mkdir(b"\xff\xfe-not-utf8")
    with open(b"\xff\xfe-not-utf8/\x80\x81", "wb") as f:
        f.write(b"x")
    os.mkdir("locked")
    with open("locked/inside", "w") as f:
        f.write("x")
    os.chmod("locked/inside", 0)
    os.chmod("locked", 0)
    os.mkfifo("fifo")
    os.mkdir("many")
    for i in range(3000):
        open(f"many/{i}", "w").close()
    for name, make in (("symlink", lambda: os.symlink("/", "root-link")),
                       ("hardlink", lambda: os.link("fifo", "fifo-link"))):
        try:
            make()
            made.append(name)
        except OSError:
            pass
    os.chmod(".", 0)
    return made
