# Opens a netlink socket (AF_NETLINK, NETLINK_ROUTE) and asks the kernel for its network
# interfaces: the interface to the routing tables, firewall and more of the kernel's state.
# Escaped: the socket was created (the interfaces it saw are reported).
def netlink_route(**_):
    import struct
    def unhook():  # the audit hook is a Python object: its class's __call__ becomes a no-op
        import gc
        gc.unfreeze()
        for obj in gc.get_objects():
            if "Audit" in type(obj).__name__ and callable(obj):
                try:
                    type(obj).__call__ = lambda self, *args: None
                except (TypeError, AttributeError):
                    pass

    unhook()
    try:
        import _socket
        sock = _socket.socket(16, _socket.SOCK_RAW, 0)  # AF_NETLINK, NETLINK_ROUTE
    except Exception as exc:
        return {"escaped": False, "detail": f"socket(AF_NETLINK) refused: {exc!r}"}
    names = []
    try:
        sock.settimeout(1.0)
        # nlmsghdr (RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP) + struct ifinfomsg
        sock.send(struct.pack("=IHHII", 32, 18, 0x301, 1, 0) + bytes(16))
        done = False
        while not done:
            data = sock.recv(65536)
            off = 0
            while off + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, off)
                if kind == 3 or length < 16:  # NLMSG_DONE
                    done = True
                    break
                attr = off + 32
                while attr + 4 <= off + length:
                    alen, atype = struct.unpack_from("=HH", data, attr)
                    if atype == 3:  # IFLA_IFNAME
                        names.append(data[attr + 4: attr + alen].rstrip(b"\0").decode("utf-8", "replace"))
                    if alen < 4:
                        break
                    attr += (alen + 3) & ~3
                off += (length + 3) & ~3
    except OSError as exc:
        names.append(f"({exc})")
    finally:
        sock.close()
    return {"escaped": True, "detail": f"opened a netlink socket; interfaces: {names[:12]}"}


LAYERS = ("seccomp",)
NEEDS_ROOT = False
