"""Files that are not what they claim to be: external data leaving the model's folder
through symlinks, FIFOs / directories / sockets where a file is read, and writer targets
that must not be replaced (FIFO, directory, socket, read-only file, the input model and
its external data through hard links and symlinks)."""

from hostile import Case

OUTSIDE = "must-not-leak/secret.bin"  # a file outside the model's folder, in the workspace
NOT_BENEATH = "which is not beneath"


def ext_model(ws, location, extra=()):
    """m/model.onnx whose weight w (float32[4]) is external data at `location`; a secret
    outside m/ that a symlink may try to reach."""
    ws.mkdir("m")
    ws.weights(OUTSIDE)
    return ws.model("m/model.onnx", external=[("location", location)] + list(extra))


def link_out(kind):
    """External data reaching outside the model's folder through a symlink of `kind`."""
    def build(ws):
        if kind == "relative":
            ws.symlink("../" + OUTSIDE, "m/w.bin")
            loc = "w.bin"
        elif kind == "absolute":
            ws.symlink(ws.p(OUTSIDE), "m/w.bin")
            loc = "w.bin"
        elif kind == "folder":
            ws.symlink("../must-not-leak", "m/blobs")
            loc = "blobs/secret.bin"
        else:  # a chain: inside -> inside -> outside
            ws.symlink("hop2.bin", "m/w.bin")
            ws.symlink("../" + OUTSIDE, "m/hop2.bin")
            loc = "w.bin"
        return ext_model(ws, loc)
    return build


def run_ext(kind, command="run"):
    def build(ws):
        model = link_out(kind)(ws)
        if command == "compile":
            return ["compile", model, "-o", ws.p("m/out.pta")]
        return ["run", model, "--output-dir", ws.p("out")]
    return build


CASES = []

# --- external data leaving the model's folder -----------------------------------------
for kind in ("relative", "absolute", "folder", "chain"):
    for command in ("run", "compile"):
        CASES.append(Case(f"external_symlink_{kind}_{command}", run_ext(kind, command),
                          ["initializer 'w': external data", "resolves to", "must-not-leak/secret.bin",
                           NOT_BENEATH, "--external-data-root"]))

CASES += [
    Case("external_dotdot_location", lambda ws: ["run", ext_model(ws, "../" + OUTSIDE)],
         ["external data location '../must-not-leak/secret.bin' must be a relative path inside the model's directory"]),
    Case("external_absolute_location", lambda ws: ["run", ext_model(ws, ws.p(OUTSIDE))],
         ["must be a relative path inside the model's directory"]),
    Case("external_fifo", lambda ws: (ws.mkdir("m"), ws.fifo("m/w.bin"), ["run", ext_model(ws, "w.bin")])[-1],
         ["external data 'w.bin'", "is a FIFO, not a regular file"]),
    Case("external_directory", lambda ws: (ws.mkdir("m/w.bin"), ["compile", ext_model(ws, "w.bin"), "-o", ws.p("o.pta")])[-1],
         ["external data 'w.bin'", "is a directory, not a regular file"]),
    Case("external_socket", lambda ws: (ws.mkdir("m"), ws.unix_socket("m/w.bin"), ["run", ext_model(ws, "w.bin")])[-1],
         ["external data 'w.bin'", "is a socket, not a regular file"]),
    Case("external_missing", lambda ws: ["run", ext_model(ws, "nope.bin")],
         ["external data 'nope.bin'", "No such file"]),
    # A trusted root lets a symlink into it through: the right values come out.
    Case("external_trusted_root_allows", lambda ws: [
        "run", link_out("relative")(ws), "--external-data-root", ws.p("must-not-leak"), "--input",
        "x=" + ws.npy("x.npy", (4,))], ["output y", "first [0, 1, 2, 3]"], succeed=True),
    Case("external_trusted_root_still_refuses_elsewhere", lambda ws: (
        ws.mkdir("other"),
        ["run", link_out("relative")(ws), "--external-data-root", ws.p("other")])[-1],
        [NOT_BENEATH, "must-not-leak/secret.bin"]),
    Case("external_root_not_a_folder", lambda ws: [
        "run", ext_model(ws, "w.bin"), "--external-data-root", ws.p(OUTSIDE)],
        ["--external-data-root", "is not a folder"]),
]

# --- reading something that is not a regular file -------------------------------------
def plain_model(ws):
    return ws.model("model.onnx")


for ext in ("npy", "pb"):
    CASES += [
        Case(f"input_{ext}_fifo", lambda ws, ext=ext: ["run", plain_model(ws), "--input", "x=" + ws.fifo("x." + ext)],
             [f"x.{ext}' is a FIFO, not a regular file"]),
        Case(f"input_{ext}_directory", lambda ws, ext=ext: ["run", plain_model(ws), "--input", "x=" + ws.mkdir("d." + ext)],
             [f"d.{ext}' is a directory, not a regular file"]),
        Case(f"input_{ext}_socket", lambda ws, ext=ext: ["run", plain_model(ws), "--input", "x=" + ws.unix_socket("s." + ext)],
             [f"s.{ext}' is a socket, not a regular file"]),
    ]
CASES += [
    Case("partita_run_model_fifo", lambda ws: [ws.fifo("model.pta")], ["model.pta' is a FIFO, not a regular file"],
         tool="partita-run"),
    Case("partita_run_input_fifo", lambda ws: [
        ws.compile(plain_model(ws), "model.pta"), "--input", "x=" + ws.fifo("x.npy")],
        ["x.npy' is a FIFO, not a regular file"], tool="partita-run"),
    Case("model_onnx_fifo", lambda ws: ["run", ws.fifo("model.onnx")], ["model.onnx' is a FIFO, not a regular file"]),
    Case("model_onnx_fifo_compile", lambda ws: ["compile", ws.fifo("model.onnx"), "-o", ws.p("out.pta")],
         ["model.onnx' is a FIFO, not a regular file"]),
    Case("model_pta_fifo", lambda ws: ["run", ws.fifo("model.pta")], ["model.pta' is a FIFO, not a regular file"]),
    Case("model_directory", lambda ws: ["run", ws.mkdir("model.onnx")], ["model.onnx' is a directory, not a regular file"]),
    Case("inspect_fifo", lambda ws: ["inspect", ws.fifo("model.pta")], ["model.pta' is a FIFO, not a regular file"]),
    # A .pb input may use external data too: the same rule, beneath the .pb's folder.
    Case("input_pb_external_symlink_out", lambda ws: (
        ws.weights(OUTSIDE), ws.symlink("../" + OUTSIDE, "in/x.bin"),
        ["run", plain_model(ws), "--input",
         "x=" + ws.pb("in/x.pb", ws.tensor([4], external=[("location", "x.bin")], name="x"))])[-1],
        ["external data 'x.bin'", NOT_BENEATH]),
]

# --- writer targets that must not be replaced -----------------------------------------
def compile_to(make_target):
    def build(ws):
        model = ws.model("model.onnx")
        return ["compile", model, "-o", make_target(ws)]
    return build


def compile_ext_to(make_target):
    def build(ws):
        ws.weights("m/w.bin")
        model = ext_model(ws, "w.bin")
        return ["compile", model, "-o", make_target(ws)]
    return build


REFUSE = "refusing to write"
CASES += [
    Case("compile_to_fifo", compile_to(lambda ws: ws.fifo("out.pta")), [REFUSE, "it is a FIFO, not a regular file"]),
    Case("compile_to_directory", compile_to(lambda ws: ws.mkdir("out.pta")), [REFUSE, "it is a directory"]),
    Case("compile_to_socket", compile_to(lambda ws: ws.unix_socket("out.pta")), [REFUSE, "it is a socket"]),
    Case("compile_to_symlink_to_fifo", compile_to(lambda ws: (ws.fifo("pipe"), ws.symlink("pipe", "out.pta"))[-1]),
         [REFUSE, "it is a symlink to a FIFO"]),
    Case("compile_to_read_only", compile_to(lambda ws: ws.write("out.pta", b"keep me", mode=0o444)),
         [REFUSE, "write-protected (mode 0444)"]),
    Case("compile_to_read_only_0400", compile_to(lambda ws: ws.write("out.pta", b"keep me", mode=0o400)),
         [REFUSE, "write-protected (mode 0400)"]),
    Case("compile_over_input_model", lambda ws: ["compile", ws.model("model.onnx"), "-o", ws.p("model.onnx")],
         [REFUSE, "it is the input model"]),
    Case("compile_over_input_model_hard_link", lambda ws: (
        ws.model("model.onnx"), ["compile", ws.p("model.onnx"), "-o", ws.hardlink("model.onnx", "out.pta")])[-1],
        [REFUSE, "it is the input model"]),
    Case("compile_over_input_model_symlink", lambda ws: (
        ws.model("model.onnx"), ["compile", ws.p("model.onnx"), "-o", ws.symlink("model.onnx", "out.pta")])[-1],
        [REFUSE, "it is the input model"]),
    Case("compile_over_external_data", compile_ext_to(lambda ws: ws.p("m/w.bin")),
         [REFUSE, "it is external data 'w.bin' of the model"]),
    Case("compile_over_external_data_hard_link", compile_ext_to(lambda ws: ws.hardlink("m/w.bin", "out.pta")),
         [REFUSE, "it is external data 'w.bin' of the model"]),
    Case("run_output_fifo", lambda ws: (ws.fifo("out/y.npy"), ["run", plain_model(ws), "--output-dir", ws.p("out")])[-1],
         [REFUSE, "y.npy': it is a FIFO"]),
    Case("run_output_read_only", lambda ws: (
        ws.write("out/y.npy", b"keep", mode=0o444), ["run", plain_model(ws), "--output-dir", ws.p("out")])[-1],
        [REFUSE, "y.npy': it is write-protected (mode 0444)"]),
    Case("run_output_dir_is_a_file", lambda ws: ["run", plain_model(ws), "--output-dir", ws.write("out", b"a file")],
         ["out"]),
    Case("inspect_dot_fifo", lambda ws: (
        ws.compile(plain_model(ws), "a.pta"), ws.fifo("p.dot"), ["inspect", "--dot", ws.p("p.dot"), ws.p("a.pta")])[-1],
        [REFUSE, "p.dot': it is a FIFO"]),
]
