"""How a system library links: its static archive, or with --define=system_libs=shared its
shared library (docs/build.md, "How the binaries link")."""

def system_link(libs, extra = []):
    """linkopts for the Debian libraries `libs` (names without "lib"): `-l:libNAME.a` in one link
    group (their order does not matter then) with --gc-sections, or `-lNAME` under
    --define=system_libs=shared. `extra` (e.g. -latomic, always shared) is added to both."""
    static = ["-Wl,--gc-sections", "-Wl,--start-group"]
    static += ["-l:lib%s.a" % l for l in libs]
    static += ["-Wl,--end-group"]
    return select({
        "//third_party/system:shared_libs": ["-l" + l for l in libs] + extra,
        "//conditions:default": static + extra,
    })
