#!/usr/bin/env python3
"""Generates the wire test vectors (one frame per file) and MANIFEST.

MANIFEST lines: FILE<TAB>ROLE<TAB>VERDICT<TAB>DETAIL
  VERDICT ok               DETAIL = frame type
  VERDICT invalid          DETAIL = a substring of the reason (close 1008)
  VERDICT too-large        DETAIL = a substring of the reason (close 1009)
  VERDICT invalid-request  DETAIL = a substring of request_error (invalid response)
Run from this directory: python3 gen_vectors.py (rewrites vectors/ and MANIFEST).
"""
import base64, json, os, shutil

U1 = "0f8fad5b-d9cb-469f-a165-70867728950e"
U2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
U3 = "16fd2706-8baf-433b-82eb-8c7fada847da"
D1 = "a" * 64
D2 = "0123456789abcdef" * 4
TS = "2026-11-29T12:00:00Z"

HOST = {"cpu_cores": 4, "load_1m": 0.25, "memory_total_bytes": 8589934592,
        "memory_available_bytes": 4294967296, "disk_total_bytes": 107374182400,
        "disk_available_bytes": 53687091200, "sandboxes_active": 1, "sandboxes_retained": 2}
HEALTH = {"provider_ready": True, "observed_at": TS,
          "active_operations": [{"id": U3, "operation": "exec", "state": "running"}], "host": HOST}
HEALTH_GM = {"observed_at": TS, "active_operations": [], "host": HOST}
OBS = [{"generation": 3, "specification_digest": D1, "state": "ready"},
       {"generation": 2, "specification_digest": D2, "state": "failed",
        "diagnostic": "configuration_invalid"}]
DEPLOY = {"generation": 3, "specification_digest": D1, "serving_generation": None}

def hello(**kw):
    f = {"type": "hello", "version": 1, "node_id": U1, "installation_id": U2, "provider": "docker",
         "backend_fingerprint": "docker/20.10.24 overlay2 cgroupfs", "deployment_generation": 1,
         "specification_digest": D1, "max_active": 10, "max_retained": 100, "health": HEALTH}
    f.update(kw); return f

def request(op, args, **kw):
    f = {"type": "request", "version": 1, "id": U3, "connection_id": U1, "owner_epoch": 7,
         "sequence": 1, "generation": 1, "operation": op, "timeout_ms": 30000, "arguments": args}
    f.update(kw); return f

def response(**kw):
    f = {"type": "response", "version": 1, "id": U3, "connection_id": U1}
    f.update(kw); return f

B64 = base64.b64encode(b"hello world").decode()
CREATE = {"sandbox_id": U2, "image": "python", "command": ["python3", "-c", "print(1)"],
          "env": {"PATH": "/usr/bin", "_X1": ""}, "cpu_millis": 1000, "memory_bytes": 268435456}

VALID = {
  "core_hello": ("core", hello()),
  "core_hello_gm": ("core", hello(health=HEALTH_GM, generation_management=True, generations=OBS)),
  "core_hello_not_ready": ("core", hello(health=dict(HEALTH, provider_ready=False,
                                                     diagnostic="daemon_unreachable"))),
  "core_hello_unknown_diagnostic": ("core", hello(health=dict(HEALTH, provider_ready=False,
                                                              diagnostic="brand_new_code"))),
  "node_welcome": ("node", {"type": "welcome", "version": 1, "connection_id": U1, "owner_epoch": 7}),
  "node_welcome_deployment": ("node", {"type": "welcome", "version": 1, "connection_id": U1,
      "owner_epoch": 7, "deployment": dict(DEPLOY, serving_generation=2)}),
  "core_heartbeat": ("core", {"type": "heartbeat", "version": 1, "connection_id": U1,
                              "owner_epoch": 7, "health": HEALTH}),
  "core_heartbeat_gm": ("core", {"type": "heartbeat", "version": 1, "connection_id": U1,
                                 "owner_epoch": 7, "health": HEALTH_GM, "generations": OBS}),
  "node_heartbeat_ack": ("node", {"type": "heartbeat_ack", "version": 1, "connection_id": U1,
                                  "owner_epoch": 7, "deployment": DEPLOY}),
  "core_retention": ("core", {"type": "retention", "version": 1, "id": U3, "sequence": 1,
      "connection_id": U1, "owner_epoch": 7,
      "entries": [{"generation": 2, "specification_digest": D2}]}),
  "node_retention_ack": ("node", {"type": "retention_ack", "version": 1, "id": U3, "sequence": 1,
      "connection_id": U1, "owner_epoch": 7,
      "entries": [{"generation": 2, "specification_digest": D2, "keep": False}]}),
  "node_request_create": ("node", request("create", CREATE)),
  "node_request_create_minimal": ("node", request("create", {"sandbox_id": U2, "image": "python",
      "cpu_millis": 1, "memory_bytes": 16777216})),
  "node_request_resume": ("node", request("resume", {"sandbox_id": U2, "reconciliation_only": True})),
  "node_request_kill": ("node", request("kill", {"sandbox_id": U2})),
  "node_request_kill_compute": ("node", request("kill_compute", {"sandbox_id": U2})),
  "node_request_delete_retained": ("node", request("delete_retained", {"sandbox_id": U2})),
  "node_request_inspect": ("node", request("inspect", {"sandbox_id": U2})),
  "node_request_exec": ("node", request("exec", {"sandbox_id": U2, "argv": ["cat"], "stdin": B64,
                                                 "output_limit_bytes": 1024})),
  "node_request_write_file": ("node", request("write_file", {"sandbox_id": U2, "path": "/tmp/a.txt",
                                                             "content": B64, "mode": 420})),
  "node_request_read_file": ("node", request("read_file", {"sandbox_id": U2, "path": "/etc/hosts",
                                                           "max_bytes": 4096})),
  "node_request_observe": ("node", request("observe", {"operation_id": U2})),
  "core_response_create": ("core", response(result={"sandbox_id": U2, "native_id": "abc123",
                                                    "state": "running"})),
  "core_response_no_result": ("core", response()),
  "core_response_failed_settled": ("core", response(error_code="failed", info={"create_settled": {
      "request_id": U3, "sandbox_id": U2, "native_id": "abc", "generation": 1,
      "specification_digest": D1}})),
  "core_response_unsupported": ("core", response(error_code="unsupported", unsupported={
      "operation": "exec", "reason": "this provider cannot exec"})),
  "core_response_observe": ("core", response(result={"operation_id": U2, "operation": "exec",
      "state": "completed", "response": {"id": U2, "result": {"exit_code": 0, "stdout": "",
      "stderr": "", "truncated": True}}})),
}

def dumps(f):
    return json.dumps(f, separators=(",", ":"), ensure_ascii=False).encode()

def sub(f, **kw):
    g = json.loads(json.dumps(f)); g.update(kw); return g

def drop(f, k):
    g = json.loads(json.dumps(f)); del g[k]; return g

H = VALID["core_hello"][1]
WEL = VALID["node_welcome"][1]
HB = VALID["core_heartbeat"][1]
RET = VALID["core_retention"][1]
ACK = VALID["node_retention_ack"][1]
REQ = VALID["node_request_inspect"][1]
WF = VALID["node_request_write_file"][1]
wfa = lambda **kw: request("write_file", dict(WF["arguments"], **kw))

# name -> (role, bytes or frame, verdict, detail)
INVALID = {
  # §2.1 size
  "control_over_32k": ("node", dumps(WEL)[:-1] + b" " * 32768 + b"}", "too-large", "control frame"),
  # §2.2 JSON
  "not_json": ("node", b"hello", "invalid", "invalid JSON"),
  "top_level_array": ("node", b"[1]", "invalid", "not an object"),
  "trailing_garbage": ("node", dumps(WEL) + b"x", "invalid", "trailing data"),
  "two_objects": ("node", dumps(WEL) + dumps(WEL), "invalid", "trailing data"),
  "bom": ("node", b"\xef\xbb\xbf" + dumps(WEL), "invalid", "invalid JSON"),
  "too_deep": ("node", dumps(WEL)[:-1] + b',"x":[[[[[[[[1]]]]]]]]}', "invalid", "nesting deeper"),
  "invalid_utf8": ("node", dumps(WEL)[:-1] + b',"x":"\xc3\x28"}', "invalid", "invalid UTF-8"),
  "overlong_utf8": ("node", dumps(WEL)[:-1] + b',"x":"\xc0\xaf"}', "invalid", "invalid UTF-8"),
  "raw_surrogate": ("node", dumps(WEL)[:-1] + b',"x":"\xed\xa0\x80"}', "invalid", "invalid UTF-8"),
  "escaped_nul": ("node", dumps(WEL)[:-1] + b',"x":"a\\u0000"}', "invalid", "\\u0000"),
  "unpaired_high_surrogate": ("node", dumps(WEL)[:-1] + b',"x":"\\ud800x"}', "invalid", "unpaired surrogate"),
  "unpaired_low_surrogate": ("node", dumps(WEL)[:-1] + b',"x":"\\udc00"}', "invalid", "unpaired surrogate"),
  "raw_control_char": ("node", dumps(WEL)[:-1] + b',"x":"a\x01"}', "invalid", "control character"),
  "leading_zero": ("node", dumps(WEL)[:-1] + b',"x":01}', "invalid", "leading zero"),
  "trailing_comma": ("node", dumps(WEL)[:-1] + b',}', "invalid", "member name"),
  # §2.3 version
  "version_2": ("node", sub(WEL, version=2), "invalid", "welcome.version: must be the integer 1"),
  "version_string": ("node", sub(WEL, version="1"), "invalid", "welcome.version"),
  "version_float": ("node", sub(WEL, version=1.0), "invalid", "welcome.version"),
  "version_missing": ("node", drop(WEL, "version"), "invalid", "missing member 'version'"),
  # §2.4 type
  "type_unknown": ("node", sub(WEL, type="goodbye"), "invalid", "frame.type: not a frame type"),
  "type_missing": ("node", drop(WEL, "type"), "invalid", "missing member 'type'"),
  "hello_to_node": ("node", H, "invalid", "a node does not accept \"hello\""),
  "request_to_core": ("core", REQ, "invalid", "Core does not accept \"request\""),
  "type_last_ok_but_bad_epoch": ("node", b'{"version":1,"connection_id":"' + U1.encode() +
      b'","owner_epoch":0,"type":"welcome"}', "invalid", "welcome.owner_epoch: not a positive int64"),
  # §2.5 members
  "unknown_member": ("node", sub(WEL, bogus=1), "invalid", "welcome: unknown member 'bogus'"),
  "case_alias": ("core", dict(drop(H, "node_id"), Node_ID=U1), "invalid", "hello: unknown member 'Node_ID'"),
  "duplicate_equal": ("node", dumps(WEL)[:-1] + b',"owner_epoch":7}', "invalid", "duplicate member 'owner_epoch' in frame"),
  "duplicate_escaped": ("node", dumps(WEL)[:-1] + b',"\\u006fwner_epoch":7}', "invalid", "duplicate member 'owner_epoch'"),
  "duplicate_nested": ("core", dumps(HB).replace(b'"cpu_cores":4', b'"cpu_cores":4,"cpu_cores":4'), "invalid", "duplicate member 'cpu_cores'"),
  "null_member": ("node", sub(WEL, connection_id=None), "invalid", "welcome.connection_id: null is not allowed"),
  "missing_member": ("node", drop(WEL, "owner_epoch"), "invalid", "welcome: missing member 'owner_epoch'"),
  # §2.6 types
  "int_fraction": ("node", dumps(WEL).replace(b'"owner_epoch":7', b'"owner_epoch":7.0'), "invalid", "welcome.owner_epoch"),
  "int_exponent": ("node", dumps(WEL).replace(b'"owner_epoch":7', b'"owner_epoch":1e3'), "invalid", "welcome.owner_epoch"),
  "int_minus_zero": ("node", dumps(WEL).replace(b'"owner_epoch":7', b'"owner_epoch":-0'), "invalid", "welcome.owner_epoch"),
  "int_overflow": ("node", dumps(WEL).replace(b'"owner_epoch":7', b'"owner_epoch":9223372036854775808'), "invalid", "welcome.owner_epoch"),
  "int_as_string": ("node", sub(WEL, owner_epoch="7"), "invalid", "welcome.owner_epoch"),
  "uuid_uppercase": ("node", sub(WEL, connection_id=U1.upper()), "invalid", "welcome.connection_id: not a canonical"),
  "uuid_braced": ("node", sub(WEL, connection_id="{" + U1 + "}"), "invalid", "welcome.connection_id"),
  "digest_uppercase": ("node", sub(WEL, deployment=dict(DEPLOY, specification_digest="A" * 64)), "invalid", "welcome.deployment.specification_digest"),
  "digest_short": ("node", sub(WEL, deployment=dict(DEPLOY, specification_digest="a" * 63)), "invalid", "welcome.deployment.specification_digest"),
  "timestamp_offset": ("core", sub(HB, health=dict(HEALTH, observed_at="2026-11-29T12:00:00+00:00")), "invalid", "heartbeat.health.observed_at"),
  "timestamp_lower_z": ("core", sub(HB, health=dict(HEALTH, observed_at="2026-11-29T12:00:00z")), "invalid", "heartbeat.health.observed_at"),
  "timestamp_feb30": ("core", sub(HB, health=dict(HEALTH, observed_at="2026-02-30T12:00:00Z")), "invalid", "heartbeat.health.observed_at"),
  "timestamp_10_fraction_digits": ("core", sub(HB, health=dict(HEALTH, observed_at="2026-11-29T12:00:00.1234567890Z")), "invalid", "observed_at"),
  "code_uppercase": ("core", sub(H, provider="Docker"), "invalid", "hello.provider: not a code"),
  "fingerprint_too_long": ("core", sub(H, backend_fingerprint="x" * 257), "invalid", "hello.backend_fingerprint: longer than 256"),
  "max_active_zero": ("core", sub(H, max_active=0), "invalid", "hello.max_active: out of range"),
  "load_exponent": ("core", dumps(HB).replace(b'"load_1m":0.25', b'"load_1m":2.5e-1'), "invalid", "heartbeat.health.host.load_1m"),
  "load_string": ("core", sub(HB, health=dict(HEALTH, host=dict(HOST, load_1m="0.25"))), "invalid", "load_1m: not a number"),
  # §3 present-iff
  "gm_false": ("core", sub(H, generation_management=False, generations=[]), "invalid", "hello.generation_management: must be true"),
  "gm_without_generations": ("core", sub(H, health=HEALTH_GM, generation_management=True), "invalid", "generations must be present"),
  "provider_ready_with_gm": ("core", sub(H, generation_management=True, generations=[]), "invalid", "provider_ready must be absent"),
  "provider_ready_missing": ("core", sub(H, health=HEALTH_GM), "invalid", "missing member 'provider_ready'"),
  "diagnostic_when_ready": ("core", sub(HB, health=dict(HEALTH, diagnostic="provider_starting")), "invalid", "diagnostic is allowed only"),
  "diagnostic_missing_not_ready": ("core", sub(HB, health=dict(HEALTH, provider_ready=False)), "invalid", "missing member 'diagnostic'"),
  "too_many_active_ops": ("core", sub(HB, health=dict(HEALTH, active_operations=[{"id": U3, "operation": "exec", "state": "queued"}] * 33)), "invalid", "active_operations: more than 32"),
  "too_many_generations": ("core", sub(HB, health=HEALTH_GM, generations=OBS * 5), "invalid", "heartbeat.generations: more than 8"),
  "observation_ready_with_diagnostic": ("core", sub(HB, health=HEALTH_GM, generations=[dict(OBS[0], diagnostic="image_missing")]), "invalid", "generations[0]: diagnostic must be absent"),
  "deployment_serving_missing": ("node", sub(WEL, deployment={"generation": 3, "specification_digest": D1}), "invalid", "missing member 'serving_generation'"),
  "retention_empty": ("core", sub(RET, entries=[]), "invalid", "retention.entries: fewer than 1"),
  "retention_nine": ("core", sub(RET, entries=[{"generation": g, "specification_digest": D2} for g in range(1, 10)]), "invalid", "more than 8"),
  "retention_duplicate_pair": ("core", sub(RET, entries=RET["entries"] * 2), "invalid", "not unique"),
  "retention_with_keep": ("core", sub(RET, entries=[dict(RET["entries"][0], keep=True)]), "invalid", "unknown member 'keep'"),
  "retention_ack_without_keep": ("node", sub(ACK, entries=RET["entries"]), "invalid", "missing member 'keep'"),
  # §4 envelope (frame-invalid)
  "request_generation_float": ("node", dumps(REQ).replace(b'"generation":1', b'"generation":1.0'), "invalid", "request.generation: not an int64"),
  "request_sequence_zero": ("node", sub(REQ, sequence=0), "invalid", "request.sequence: not a positive int64"),
  "request_operation_number": ("node", sub(REQ, operation=5), "invalid", "request.operation: not a string"),
  "request_arguments_array": ("node", sub(REQ, arguments=[]), "invalid", "request.arguments: not an object"),
  "request_arguments_missing": ("node", drop(REQ, "arguments"), "invalid", "missing member 'arguments'"),
  "request_args_duplicate": ("node", dumps(REQ).replace(b'"sandbox_id"', b'"sandbox_id":"x","sandbox_id"'), "invalid", "duplicate member 'sandbox_id'"),
  "request_args_leading_zero": ("node", dumps(REQ)[:-2] + b',"n":00}}', "invalid", "leading zero"),
  "request_env_duplicate_key": ("node", dumps(request("create", CREATE)).replace(b'"PATH":"/usr/bin"', b'"PATH":"/usr/bin","PATH":"/usr/bin"'), "invalid", "duplicate member 'PATH'"),
  # §5 response
  "response_result_and_error": ("core", response(result={"size": 1}, error_code="failed"), "invalid", "must not appear together"),
  "response_unknown_error_code": ("core", response(error_code="teapot"), "invalid", "response.error_code: not one of"),
  "response_info_without_failed": ("core", response(error_code="conflict", info=VALID["core_response_failed_settled"][1]["info"]), "invalid", "info is allowed only"),
  "response_unsupported_without_code": ("core", response(unsupported={"operation": "exec", "reason": "no"}), "invalid", "unsupported is allowed only"),
  "response_reason_too_long": ("core", response(error_code="unsupported", unsupported={"operation": "exec", "reason": "r" * 201}), "invalid", "reason: longer than 200"),
  "response_result_null": ("core", response(result=None), "invalid", "response.result: null is not allowed"),
}

# Envelope-valid requests that earn an `invalid` response.
INVALID_REQUEST = {
  "unknown_operation": (sub(REQ, operation="explode"), "request.operation: unknown operation"),
  "generation_zero": (sub(REQ, generation=0), "request.generation: not a positive int64"),
  "timeout_zero": (sub(REQ, timeout_ms=0), "request.timeout_ms: out of range"),
  "timeout_too_large": (sub(REQ, timeout_ms=3600001), "request.timeout_ms: out of range"),
  "args_unknown_member": (request("inspect", {"sandbox_id": U2, "foo": 1}), "request.arguments: unknown member 'foo'"),
  "args_null": (request("inspect", {"sandbox_id": None}), "request.arguments.sandbox_id: null is not allowed"),
  "args_missing": (request("inspect", {}), "request.arguments: missing member 'sandbox_id'"),
  "args_float_int": (dumps(wfa()).replace(b'"mode":420', b'"mode":420.0'), "request.arguments.mode: not an int64"),
  "args_minus_zero": (dumps(wfa()).replace(b'"mode":420', b'"mode":-0'), "request.arguments.mode: not an int64"),
  "mode_too_large": (wfa(mode=512), "request.arguments.mode: out of range"),
  "base64_no_padding": (wfa(content="aGVsbG8"), "request.arguments.content: not canonical base64"),
  "base64_pad_bits": (wfa(content="aGVsbG9="), "request.arguments.content: not canonical base64"),
  "base64_whitespace": (wfa(content="aGVs bG8="), "request.arguments.content: not canonical base64"),
  "base64_urlsafe": (wfa(content="-_-_"), "request.arguments.content: not canonical base64"),
  "path_relative": (wfa(path="tmp/a"), "request.arguments.path: not an absolute path"),
  "path_dotdot": (wfa(path="/tmp/../etc/passwd"), "request.arguments.path"),
  "path_dot": (wfa(path="/tmp/./a"), "request.arguments.path"),
  "path_trailing_slash": (wfa(path="/tmp/"), "request.arguments.path"),
  "path_root": (wfa(path="/"), "request.arguments.path"),
  "path_double_slash": (wfa(path="//etc"), "request.arguments.path"),
  "path_too_long": (wfa(path="/" + "a" * 4096), "request.arguments.path"),
  "create_image_too_long": (request("create", dict(CREATE, image="i" * 129)), "request.arguments.image: longer than 128"),
  "create_env_bad_key": (request("create", dict(CREATE, env={"1BAD": "x"})), "request.arguments.env: a key is not"),
  "create_env_too_many": (request("create", dict(CREATE, env={f"K{i}": "v" for i in range(65)})), "request.arguments.env: more than 64"),
  "create_command_too_many": (request("create", dict(CREATE, command=["a"] * 65)), "request.arguments.command: more than 64"),
  "create_command_arg_too_long": (request("create", dict(CREATE, command=["a" * 4097])), "request.arguments.command[0]: longer than 4096"),
  "create_memory_too_small": (request("create", dict(CREATE, memory_bytes=16777215)), "request.arguments.memory_bytes: out of range"),
  "create_cpu_too_large": (request("create", dict(CREATE, cpu_millis=256001)), "request.arguments.cpu_millis: out of range"),
  "exec_empty_argv": (request("exec", {"sandbox_id": U2, "argv": [], "output_limit_bytes": 0}), "request.arguments.argv: fewer than 1"),
  "exec_output_limit": (request("exec", {"sandbox_id": U2, "argv": ["a"], "output_limit_bytes": 33554433}), "request.arguments.output_limit_bytes: out of range"),
  "read_file_max_bytes": (request("read_file", {"sandbox_id": U2, "path": "/a", "max_bytes": 50331649}), "request.arguments.max_bytes: out of range"),
  "resume_missing_flag": (request("resume", {"sandbox_id": U2}), "missing member 'reconciliation_only'"),
  "sandbox_id_uppercase": (request("kill", {"sandbox_id": U2.upper()}), "request.arguments.sandbox_id: not a canonical"),
  "observe_wrong_member": (request("observe", {"sandbox_id": U2}), "request.arguments: unknown member 'sandbox_id'"),
}

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "vectors")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    lines = []
    def put(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data if isinstance(data, bytes) else dumps(data))
    for name, (role, f) in VALID.items():
        put(f"valid_{name}.json", f)
        lines.append(f"valid_{name}.json\t{role}\tok\t{f['type']}")
    for name, (role, f, verdict, detail) in INVALID.items():
        put(f"invalid_{name}.json", f)
        lines.append(f"invalid_{name}.json\t{role}\t{verdict}\t{detail}")
    for name, (f, detail) in INVALID_REQUEST.items():
        put(f"invalid_request_{name}.json", f)
        lines.append(f"invalid_request_{name}.json\tnode\tinvalid-request\t{detail}")
    with open(os.path.join(here, "MANIFEST"), "w") as m:
        m.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
