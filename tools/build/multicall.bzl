"""The node's one executable under one of its program names (docs/architecture.md, "One
executable, three programs")."""

def _program_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name)
    src = ctx.executable.executable
    ctx.actions.run_shell(
        inputs = [src],
        outputs = [out],
        command = "cp -f '%s' '%s' && chmod 0755 '%s'" % (src.path, out.path, out.path),
        mnemonic = "NodeProgram",
        progress_message = "Naming the node's executable %s" % out.short_path,
    )
    runfiles = ctx.runfiles(files = [out] + ctx.files.data)
    for d in ctx.attr.data:
        runfiles = runfiles.merge(d[DefaultInfo].default_runfiles)
    return [DefaultInfo(executable = out, files = depset([out]), runfiles = runfiles)]

node_program = rule(
    implementation = _program_impl,
    executable = True,
    doc = "A copy of //:sandbox-node named after the program it runs as (the target's name: " +
          "agent, privhelper or native_helper).",
    attrs = {
        "executable": attr.label(
            default = "//:sandbox-node",
            executable = True,
            cfg = "target",
        ),
        "data": attr.label_list(allow_files = True),
    },
)
