#!/usr/bin/env python3
"""Adversarial requests against a live docketd (see README.md beside this file).

Starts `docketd --demo` on a free loopback port with a throw-away data folder, sends generated requests one at
a time over raw sockets, and fails on any 5xx, any exit of the server, any answer slower than the time limit,
and any database change made by a request that was rejected (4xx or no answer). The generator is seeded, so a
run is repeatable: `fuzz.py --seed 7 --requests 20000`.
"""
import argparse, base64, errno, json, os, random, shutil, socket, sqlite3, subprocess, sys, tempfile, time, urllib.parse, urllib.request

FIELDS = ["number", "short_description", "state", "priority", "caller_id", "caller_id.name", "caller_id.manager.name",
          "assigned_to.department", "sys_id", "sys_created_on", "active", "impact", "AAAA", "user_password",
          "password", "opened_by.user_name", "sys_class_name", "assignment_group.manager.email", "", "..", "a.b.c"]
OPS = ["=", "!=", "<", "<=", ">", ">=", "LIKE", "NOT LIKE", "STARTSWITH", "ENDSWITH", "IN", "NOT IN", "ISEMPTY",
       "ISNOTEMPTY", "BETWEEN", "SAMEAS", "NSAMEAS", "INSTANCEOF", "ANYTHING", "EMPTYSTRING", "DYNAMIC", "ON"]
TABLES = ["incident", "task", "problem", "change_request", "sys_user", "sys_user_group", "sys_journal_field",
          "sys_attachment", "oauth_entity", "sys_db_object", "sys_dictionary", "nosuchtable", "..%2f..", "INCIDENT",
          "sys_rate_limit_rules", "kb_knowledge"]
NUMBERS = ["0", "-1", "1", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1e300", "1e309",
           "NaN", "-0", "0x10", "１２", "1.5", "99999999999999999999999999", "", " 5", "5 ", "+5", "%00", "٣"]
UNICODE = ["\u0000", "\u202e", "\ud7ff", "😀", "é", "\u0085", "\uffff", "ǅ", "\\", "'", '"', "%", "_", "^", "^^", "@"]

def rnd_text(r, n=None):
    n = r.randint(0, 40) if n is None else n
    alphabet = "abcXYZ019 ^=@,._%'\"\\/" + "".join(UNICODE)
    return "".join(r.choice(alphabet) for _ in range(n))

def rnd_value(r):
    k = r.random()
    if k < 0.3: return r.choice(NUMBERS)
    if k < 0.4: return "javascript:" + r.choice(["gs.getUserID()", "gs.daysAgo(9223372036854775807)", "x()", "gs.beginningOfToday()"])
    if k < 0.45: return r.choice(["_", "%"]) * r.randint(1, 30000)
    if k < 0.5: return ",".join(str(i) for i in range(r.randint(1, 9000)))
    return rnd_text(r)

def encoded_query(r):
    parts = []
    for _ in range(r.choice([1, 2, 5, 20, 300, 1600]) if r.random() < 0.2 else r.randint(1, 6)):
        t = r.random()
        if t < 0.08: parts.append(r.choice(["ORDERBY", "ORDERBYDESC", "GROUPBY"]) + r.choice(FIELDS))
        elif t < 0.12: parts.append("NQ" + r.choice(FIELDS) + "=" + rnd_value(r))
        elif t < 0.16: parts.append("JOINsys_user.sys_id=sys_user_group.manager!active=true")
        elif t < 0.2: parts.append("RLQUERYsys_user_has_role.user,>=1^role=x^ENDRLQUERY")
        elif t < 0.25: parts.append("caller_id" + ".manager" * r.randint(1, 40) + ".name=x")
        else:
            field = r.choice(FIELDS) if r.random() < 0.9 else rnd_text(r, 5)
            parts.append(("OR" if r.random() < 0.2 else "") + field + r.choice(OPS) + rnd_value(r))
    return "^".join(parts)

def quote(s):
    from urllib.parse import quote as q
    return q(s.encode("utf-8", "surrogatepass"), safe="") if r_global.random() < 0.95 else s.replace(" ", "%20")

def params(r):
    names = ["sysparm_query", "sysparm_limit", "sysparm_offset", "sysparm_fields", "sysparm_display_value",
             "sysparm_exclude_reference_link", "sysparm_no_count", "sysparm_suppress_pagination_header",
             "sysparm_input_display_value", "sysparm_suppress_auto_sys_field", "sysparm_count", "sysparm_sum_fields",
             "sysparm_avg_fields", "sysparm_group_by", "sysparm_having", "sysparm_order_by", "sysparm_min_fields",
             "user_name", "state", "assigned_to", "AAAA"]
    out = []
    for _ in range(r.randint(0, 5)):
        name = r.choice(names)
        value = encoded_query(r) if name == "sysparm_query" else (r.choice(NUMBERS) if r.random() < 0.5 else rnd_value(r))
        out.append(quote(name) + "=" + quote(value))
    return "&".join(out)

def json_body(r, depth=0):
    k = r.random()
    if depth > 3 or k < 0.3:
        return r.choice([json.dumps(rnd_text(r)), r.choice(["1e400", "01", "-0", "9007199254740993", "1" * 400,
                         "true", "null", "1.5e-400", "-9223372036854775809"]), '"\\ud800"', '"\\u0000"'])
    if k < 0.5:
        return "[" + ",".join(json_body(r, depth + 1) for _ in range(r.randint(0, 4))) + "]"
    fields = ["short_description", "state", "caller_id", "sys_id", "sys_created_by", "sys_mod_count", "comments",
              "work_notes", "number", "impact", "urgency", "password", "user_password", "table_name", "table_sys_id",
              "active", "reassignment_count", "x" * 300]
    return "{" + ",".join(json.dumps(r.choice(fields)) + ":" + json_body(r, depth + 1) for _ in range(r.randint(0, 6))) + "}"

def body_variants(r):
    k = r.random()
    if k < 0.6: return json_body(r).encode("utf-8", "surrogatepass")
    if k < 0.7: return ("[" * r.randint(100, 5000)).encode()
    if k < 0.8: return json_body(r).encode("utf-8", "surrogatepass")[: r.randint(0, 20)]
    if k < 0.9: return bytes(r.randint(0, 255) for _ in range(r.randint(1, 200)))
    return json.dumps({"short_description": rnd_text(r), "caller_id": rnd_text(r)}).encode("utf-8", "surrogatepass")

def auth_headers(r, creds):
    k = r.random()
    if k < 0.55: return {"Authorization": "Basic " + base64.b64encode(r.choice(creds).encode()).decode()}
    if k < 0.65: return {"Authorization": "Basic " + r.choice(["", "!!!", base64.b64encode(b"nocolon").decode(),
                         base64.b64encode(("x" * 5000 + ":y").encode()).decode(), base64.b64encode(b"\x00:\xff").decode()])}
    if k < 0.75: return {"Authorization": "Bearer " + r.choice(["", "forged", "a" * 5000, rnd_text(r)])}
    if k < 0.85: return {"Cookie": "JSESSIONID=" + r.choice(["", "forged", "A" * 100, rnd_text(r)])}
    if k < 0.9: return {"Authorization": r.choice(["Digest x", "Basic", "Bearer", "Negotiate " + "=" * 20])}
    return {}

def build(r, creds):
    """One request as raw bytes, and whether it is deliberately truncated (the client then half-closes)."""
    kind = r.random()
    headers = auth_headers(r, creds)
    method, body, ctype = "GET", b"", None
    if kind < 0.35:
        table = r.choice(TABLES)
        path = r.choice([f"/api/now/table/{table}", f"/api/now/v1/table/{table}", f"/api/now/v2/table/{table}/{rnd_text(r, 32)}",
                         f"/api/now/table/{table}/{r.choice(['cdb04ffc53247d4908555def767adca7', '0' * 32, '..', '%00'])}"])
        method = r.choice(["GET", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
        if method in ("POST", "PUT", "PATCH"):
            body, ctype = body_variants(r), r.choice(["application/json", "application/json", "text/plain", "", "application/x-www-form-urlencoded"])
        path += "?" + params(r)
    elif kind < 0.45:
        path = f"/api/now/stats/{r.choice(TABLES)}?" + params(r)
    elif kind < 0.55:
        method, ctype = "POST", "application/json"
        reqs = []
        for _ in range(r.randint(0, 4)):
            sub = {"id": r.choice([1, 1e19, 1e300, -1, "x", None, [], 12345678901234567890]),
                   "method": r.choice(["GET", "POST", "DELETE", "BREW", "", None]),
                   "url": r.choice(["/api/now/table/incident?" + params(r), "/api/now/v1/batch", "relative", "/x", None]),
                   "headers": r.choice([[{"name": "Content-Type", "value": "application/json"}], [{"name": "bad name", "value": 1}], "x", None]),
                   "body": r.choice([base64.b64encode(body_variants(r)).decode(), "!!!notbase64", None, 5])}
            reqs.append({k: v for k, v in sub.items() if v is not None or r.random() < 0.5})
        doc = {"batch_request_id": r.choice([1, 1e300, "b", None, {"x": 1}]), "rest_requests": reqs if r.random() < 0.9 else "x"}
        body = json.dumps(doc).encode() if r.random() < 0.8 else body_variants(r)
        path = r.choice(["/api/now/v1/batch", "/api/now/batch"])
    elif kind < 0.62:
        method = r.choice(["POST", "GET", "DELETE"])
        path = r.choice(["/api/now/attachment/file?table_name=incident&table_sys_id=cdb04ffc53247d4908555def767adca7&file_name=" + quote(rnd_text(r)),
                         "/api/now/attachment/upload", "/api/now/v1/attachment/" + rnd_text(r, 32) + "/file", "/api/now/attachment?" + params(r)])
        if method == "POST":
            boundary = r.choice(["b", "", "x" * 80, "--"])
            ctype = r.choice([f"multipart/form-data; boundary={boundary}", "multipart/form-data", "image/png", "application/json"])
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{r.choice(['table_name', 'uploadFile', 'table_sys_id'])}\"" +
                    r.choice(["; filename=\"a.txt\"", ""]) + "\r\n\r\n" + rnd_text(r) + r.choice([f"\r\n--{boundary}--\r\n", "", "\r\n--"])).encode("utf-8", "surrogatepass")
    elif kind < 0.68:
        method, ctype = "POST", r.choice(["application/x-www-form-urlencoded", "application/json", ""])
        path = r.choice(["/oauth_token.do", "/oauth_revoke_token.do"])
        body = "&".join(f"{quote(k)}={quote(r.choice([rnd_text(r), 'password', 'refresh_token', 'docket-demo', 'john.doe']))}"
                        for k in r.sample(["grant_type", "client_id", "client_secret", "username", "password", "refresh_token", "token"], r.randint(0, 6))).encode()
        headers = {}
    elif kind < 0.71:
        # GraphQL: random documents (well-formed, broken, deep, wide), variables and bodies.
        method = r.choice(["POST", "POST", "GET"])
        pieces = ["{", "}", "(", ")", "[", "]", "GlideRecord_Query", "GlideRecord_Mutation", "mutation", "query", "incident",
                  "sys_user", "_results", "_rowCount", "_reference", "_choices", "value", "displayValue", "caller_id",
                  "queryConditions:", '"active=true^ORDERBYnumberDESC"', "pagination:", "{limit: 1000000000}", "{offset: -5}",
                  "$v", "...F", "fragment F on GlideRecord_Type_incident", "insert_incident(short_description: \"x\")",
                  "delete_incident(sys_id: \"0\")", '"""', "#", rnd_text(r, 8), "allTasks", "getTask(id: \"x\")",
                  "createTask(title: \"t\", description: \"d\", status: OPEN)", "updateTask(id: \"x\", version: 99999999999)",
                  "deleteTask(id: $v)", "subscription", "taskAdded", "...TaskFields", "__typename", "id", "version", "status"]
        doc = " ".join(r.choice(pieces) for _ in range(r.randint(0, 40)))
        if r.random() < 0.2:
            doc = r.choice(["{", "(", "["]) * r.randint(1, 50000) + doc
        if r.random() < 0.3:
            doc = "{ GlideRecord_Query { incident(pagination: {limit: 2}) { _rowCount _results { number { value displayValue } caller_id { _reference { email { value } } } } } } }"
        variables = r.choice([None, {}, {"v": "x"}, "x", [1], {"v": {"deep": [1] * 3}}])
        payload = {"query": doc, "variables": variables, "operationName": r.choice([None, "", "X", 5])}
        if method == "POST":
            ctype = r.choice(["application/json", "application/json", "text/plain", ""])
            body = json.dumps(payload).encode() if r.random() < 0.85 else body_variants(r)
            path = r.choice(["/api/now/graphql", "/graphql", "/graphql/"])
        else:
            path = r.choice(["/api/now/graphql", "/graphql"]) + "?query=" + quote(doc) + r.choice(["", "&variables=" + quote(json.dumps(variables)), "&variables=%7B"])
    elif kind < 0.72:
        # The live feed, as polls (follow=false ends; a followed stream would never answer in full).
        path = "/api/docket/events?follow=false&" + r.choice(["", "table=" + r.choice(TABLES), "table=nope"]) + "&" + \
            r.choice(["", "since=0", "since=-1", "since=99999999999999999999", "since=" + rnd_text(r, 5), "query=" + quote(rnd_text(r)),
                      "table=incident&query=active%3Dtrue"])
        if r.random() < 0.3: headers["Last-Event-ID"] = r.choice(["0", "-3", "x", "9" * 30, ""])
    elif kind < 0.735:
        return ws_upgrade(r, creds), True
    elif kind < 0.74:
        path = "/api/x_snc_my_work/v1/tracker/task" + r.choice(["", "/cdb04ffc53247d4908555def767adca7/comment", "/" + rnd_text(r, 10) + "/comment"])
        if "comment" in path:
            method, ctype, body = "POST", "application/json", body_variants(r)
    elif kind < 0.77:
        method, path, body, ctype, headers = compass_request(r)
    elif kind < 0.80:
        method, path, body, ctype, headers = eto_request(r)
    elif kind < 0.83:
        method, path, body, ctype, headers = oidc_request(r)
    elif kind < 0.85:
        method, path, body, ctype, extra = push_request(r)
        headers.update(extra)
    else:
        return raw_malformed(r, creds), True
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    for k, v in headers.items(): lines.append(f"{k}: {v}")
    if ctype: lines.append(f"Content-Type: {ctype}")
    truncated = False
    if body or method in ("POST", "PUT", "PATCH"):
        if r.random() < 0.1:
            lines.append("Transfer-Encoding: chunked")
            chunks = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n" if r.random() < 0.5 else r.choice([b"-1\r\nxx\r\n", b"fffffffffffffffffff\r\n", b"zz\r\n\r\n", b"5\r\nab"])
            truncated = not chunks.endswith(b"0\r\n\r\n")
            body = chunks
        elif r.random() < 0.05:
            lines.append(f"Content-Length: {len(body) + r.randint(1, 100)}")
            truncated = True
        else:
            lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogatepass")
    return head + body, truncated

def push_request(r):
    """Notifications: device registrations with broken, oversized and hostile bodies (endpoints at private addresses,
    keys that are not points, tokens that are not hex), removals of others' and made-up devices, inbox queries."""
    key = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    choice = r.random()
    if choice < 0.5:
        subscription = {
            "kind": r.choice([None, "webpush", "unifiedpush", "apns", "", "x" * 300, 5, ["webpush"]]),
            "endpoint": r.choice(["https://push.invalid/" + rnd_text(r, 10), "http://127.0.0.1:1/x", "https://10.0.0.1/x",
                                  "https://[::1]/x", "https://169.254.169.254/latest", "file:///etc/passwd", "https://" + "a" * 2000,
                                  "", None, 7, rnd_text(r)]),
            "keys": r.choice([{"p256dh": key, "auth": "BTBZMqHH6r4Tts7J_aSIgg"}, {"p256dh": "AAAA", "auth": ""}, {}, "x", None,
                              {"p256dh": key * 300, "auth": rnd_text(r)}]),
            "token": r.choice([None, "ab" * 32, "zz" * 32, "a" * 5000, 1e300]),
            "name": r.choice([None, rnd_text(r), "x" * 5000, {"a": 1}]),
        }
        doc = {k: v for k, v in subscription.items() if v is not None}
        body = json.dumps(doc).encode() if r.random() < 0.85 else body_variants(r)
        return "POST", "/api/docket/push/subscriptions", body, r.choice(["application/json", "application/json", "text/plain", ""]), {}
    if choice < 0.62:
        # AeroGear's device registry and sender API, with the demo's credentials or others.
        variant = r.choice([("0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d", "ios-variant-secret-3f1c"), ("1c2d3e4f-5061-4b7c-9d8e-0f1a2b3c4d5e", "nope"),
                            ("2d3e4f50-6172-4c8d-8e9f-1a2b3c4d5e6f", "web-variant-secret-9b4e"), ("x" * 300, ""), ("", "")])
        token = r.choice(["ab" * 32, "zz" * 40, "a" * 5000, "", base64.b64encode(b'{"endpoint":"https://10.0.0.1/x"}').decode(), rnd_text(r)])
        doc = r.choice([{"deviceToken": token, "deviceType": "iPhone", "alias": r.choice(["john.doe", "", rnd_text(r)]),
                         "categories": r.choice(["", ["a", 1], None, "x" * 3000])},
                        {"message": {"alert": rnd_text(r), "apns": {"title": 5}}, "criteria": {"alias": r.choice([["john.doe"], "x", None, [1] * 50])}},
                        {"alert": "legacy"}, [], "x"])
        path = r.choice(["/rest/registry/device", "/rest/registry/device", "/rest/sender", "/rest/registry/device/" + quote(token[:300]),
                         "/rest/registry/device/pushMessage/" + rnd_text(r, 5), "/rest/nothing"])
        method = "DELETE" if path.count("/") == 4 and "pushMessage" not in path else ("PUT" if "pushMessage" in path else r.choice(["POST", "POST", "OPTIONS", "GET"]))
        credentials = ("5f3e2b6c-9a41-4c9e-8a51-7d2f0c1b9e11", r.choice(["docket-demo-master-secret", "wrong"])) if "sender" in path else variant
        auth = "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
        return method, path, json.dumps(doc).encode(), "application/json", {"Authorization": auth}
    if choice < 0.7:
        return "DELETE", "/api/docket/push/subscriptions/" + r.choice(["cdb04ffc53247d4908555def767adca7", "0" * 32, rnd_text(r, 8), "..", "%00"]), b"", None, {}
    if choice < 0.8:
        return "GET", "/api/docket/push/vapid", b"", None, {}
    return "GET", "/api/docket/notifications?" + r.choice(["", "unread=true", "unread=maybe", "sysparm_limit=" + r.choice(["0", "-1", "1e300", "99999999999999999999", "5"]),
                                                         "sysparm_offset=" + r.choice(["-1", "9" * 30, "3"]), params(r)]), b"", None, {}

COMPASS = "/ccmweb/rest/repos/SampleRepository/databases/SAMPL"
compass_tokens = []
ETO_ENTERPRISES = ["7c9e6679-7425-40de-944b-e07fc1f90ae7", "c56a4180-65aa-42ec-a945-5fd21dec0538"]
eto_tokens = {"sso": [], "site": []}

oidc_tokens = {"access": [], "refresh": [], "id": []}

def oidc_request(r):
    """The OpenID provider: every endpoint under both prefixes and other realms, grants with good, replayed and
    forged codes and tokens, cross-client use, redirect URIs that must not be followed, oversized values."""
    realm = r.choice(["/realms/docket", "/realms/docket", "/auth/realms/docket", "/realms/master", "/realms/%00", "/realms/" + "d" * 300])
    endpoints = realm + "/protocol/openid-connect"
    def token(kind):
        pool = oidc_tokens[kind]
        return r.choice(pool + [rnd_text(r), "a.b.c", "e30.e30.", "x" * 9000, ""]) if pool and r.random() < 0.6 else r.choice([rnd_text(r), "a.b.c", "e30.e30.", ""])
    def form(pairs):
        return "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs).encode()
    clients = ["datasync-starter-client", "docket-mobile", "docket-demo", "docket-cli", "nobody", "", rnd_text(r, 20)]
    redirects = ["http://localhost:8765/cb", "http://127.0.0.1:1/x", "http://localhost.evil.example/", "https://evil.example/",
                 "com.docket.app:/oauth2redirect", "javascript:alert(1)", "http://localhost/#frag", "//evil.example", rnd_text(r)]
    headers, method, body, ctype = {}, "GET", b"", None
    which = r.random()
    if which < 0.04:
        path = r.choice([realm + "/.well-known/openid-configuration", endpoints + "/certs", "/mobile-services.json?client_id=" + quote(r.choice(clients))])
    elif which < 0.08:
        # The web UI's device confirmation and single sign-on pages, without a session or with forged state.
        method = r.choice(["GET", "POST"])
        path = r.choice(["/app/device?user_code=" + quote(rnd_text(r)), "/app/sso/" + r.choice(["0", "99", "-1", "x"]) + "?next=" + quote(rnd_text(r)),
                         "/app/sso/callback?code=" + quote(rnd_text(r)) + "&state=" + quote(rnd_text(r)), realm + "/device?user_code=" + quote(rnd_text(r))])
        headers["Cookie"] = r.choice(["", "docket_sso=" + rnd_text(r), "docket_sso=e30.AAAA", "docket_session=forged"])
        if method == "POST":
            ctype, body = "application/x-www-form-urlencoded", form([("user_code", rnd_text(r)), ("decision", r.choice(["allow", "deny"])), ("csrf", "x")])
    elif which < 0.35:
        pairs = [("response_type", r.choice(["code", "token", "", "code id_token"])), ("client_id", r.choice(clients)),
                 ("redirect_uri", r.choice(redirects)), ("scope", r.choice(["openid", "openid profile email", "", rnd_text(r)])),
                 ("state", r.choice(["s", "", "x" * 3000])), ("nonce", rnd_text(r)),
                 ("code_challenge", r.choice(["E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "", "short", "x" * 200])),
                 ("code_challenge_method", r.choice(["S256", "plain", ""])), ("prompt", r.choice(["", "none", "login", "consent"])),
                 ("login_hint", rnd_text(r))]
        pairs = r.sample(pairs, r.randint(0, len(pairs)))
        if r.random() < 0.1: pairs += pairs[:1]
        path = endpoints + "/auth?" + form(pairs).decode()
        if r.random() < 0.3: headers["Cookie"] = "docket_session=" + r.choice(["forged", "", "A" * 200])
    elif which < 0.7:
        method, ctype = "POST", r.choice(["application/x-www-form-urlencoded"] * 4 + ["application/json", ""])
        grant = r.choice(["password", "refresh_token", "authorization_code", "client_credentials",
                          "urn:ietf:params:oauth:grant-type:device_code", "implicit", "", rnd_text(r)])
        pairs = [("grant_type", grant), ("client_id", r.choice(clients)), ("username", r.choice(["john.doe", "admin", rnd_text(r)])),
                 ("password", r.choice(["password", "wrong", ""])), ("refresh_token", token("refresh")), ("code", rnd_text(r)),
                 ("redirect_uri", r.choice(redirects)), ("code_verifier", r.choice(["x" * 43, "", "x" * 200, rnd_text(r)])),
                 ("client_secret", r.choice(["docket-demo-secret", "wrong", ""])), ("scope", r.choice(["openid", "", rnd_text(r)]))]
        pairs = [pairs[0]] + r.sample(pairs[1:], r.randint(0, len(pairs) - 1))
        if r.random() < 0.05: pairs += [pairs[0]]
        body = form(pairs)
        if r.random() < 0.02: body += b"&x=" + b"a" * 70000
        if r.random() < 0.3: headers["Authorization"] = "Basic " + base64.b64encode(r.choice([b"docket-demo:docket-demo-secret", b"docket-demo:x", b"nocolon", b":"])).decode()
        path = endpoints + "/token"
    elif which < 0.8:
        method = r.choice(["GET", "POST"])
        path = endpoints + "/userinfo"
        headers["Authorization"] = "Bearer " + token("access")
        if method == "POST": ctype, body = "application/x-www-form-urlencoded", form([("access_token", token("access"))])
    elif which < 0.9:
        method, ctype = "POST", r.choice(["application/x-www-form-urlencoded", "text/plain"])
        path = endpoints + r.choice(["/revoke", "/token/introspect"])
        body = form([("token", token(r.choice(["access", "refresh"]))), ("client_id", r.choice(clients)),
                     ("token_type_hint", r.choice(["access_token", "refresh_token", "x"]))])
        if r.random() < 0.5: headers["Authorization"] = "Basic " + base64.b64encode(b"docket-demo:docket-demo-secret").decode()
    else:
        method = r.choice(["GET", "POST"])
        pairs = [("id_token_hint", token("id")), ("post_logout_redirect_uri", r.choice(redirects)), ("state", rnd_text(r)),
                 ("client_id", r.choice(clients)), ("refresh_token", token("refresh"))]
        pairs = r.sample(pairs, r.randint(0, len(pairs)))
        if method == "GET":
            path = endpoints + "/logout?" + form(pairs).decode()
        else:
            path, ctype, body = endpoints + "/logout", "application/x-www-form-urlencoded", form(pairs)
    return method, path, body, ctype, headers

def eto_request(r):
    """ETO's sign-in chain and programs: good and forged tokens, paths in any case, odd ids and bodies."""
    sso = r.choice(eto_tokens["sso"] * 3 + ["00000000-0000-0000-0000-000000000000", rnd_text(r, 10), ""])
    site = r.choice(eto_tokens["site"] * 3 + [rnd_text(r, 36), '"x"', ""])
    enterprise = r.choice(ETO_ENTERPRISES * 2 + [rnd_text(r, 8), ""])
    number = r.choice(["101", "102", "201", "-1", "99999999999999999999", rnd_text(r, 3)])
    headers = {} if r.random() < 0.1 else {r.choice(["enterpriseGuid", "ENTERPRISEGUID"]): enterprise, r.choice(["securityToken", "securitytoken"]): site}
    base = r.choice(["/API/Security.svc", "/api/security.svc", "/API/SECURITY.SVC"])
    k = r.random()
    if k < 0.2:
        body = json.dumps({"security": {"Email": r.choice(["john.doe@example.com", "ABEL.TUTER@example.com", rnd_text(r), ""]),
                                        "Password": r.choice(["password", "x", None, 1])}}).encode() if r.random() < 0.8 else body_variants(r)
        return "POST", base + "/SSOAuthenticate" + r.choice(["/", ""]), body, "application/json", {}
    if k < 0.35: return "GET", base + "/GetSSOEnterprises/" + quote(sso), b"", None, {}
    if k < 0.5: return "GET", base + "/GetSSOSites/" + quote(sso) + "/" + quote(enterprise), b"", None, {}
    if k < 0.65:
        offset = r.choice(["0", "-300", "8", "99999", "x", "-" + "9" * 30])
        return "GET", base + f"/SSOSiteLogin/{quote(number)}/{quote(enterprise)}/{quote(sso)}/{quote(offset)}", b"", None, {}
    if k < 0.82:
        body = json.dumps({"ProgramID": r.choice([1001, "1002", 1003, 2001, "x", None, 10**30, -1])}).encode() if r.random() < 0.8 else body_variants(r)
        return r.choice(["POST", "POST", "GET"]), base + "/UpdateCurrentProgram/", body, "application/json", headers
    if k < 0.88: return "GET", r.choice(["/API/Form.svc", "/api/form.svc"]) + "/Forms/Program/GetPrograms/" + quote(number), b"", None, headers
    if k < 0.90:
        person = {"FirstName": r.choice(["Ann", "", None, 1, rnd_text(r)]), "LastName": r.choice(["Lee", rnd_text(r), None]),
                  "DateOfBirth": r.choice(["/Date(631152000000)/", "01/31/1990", "1990-02-30", "/Date(" + "9" * 30 + ")/", None, rnd_text(r, 8)]),
                  "SiteID": r.choice([101, "201", None, "x"]), "ID": r.choice([None, None, 5001, "7001", -1, rnd_text(r, 3)])}
        body = json.dumps({"participant": person}).encode() if r.random() < 0.8 else body_variants(r)
        return "POST", "/API/Actor.svc/participant/" + r.choice(["", "true"]), body, "application/json", headers
    if k < 0.91:
        body = json.dumps({"participantID": r.choice([5001, "5002", 7001, "x", None]), "programID": r.choice([1001, "1003", 2001, None]),
                           "startDate": r.choice(["/Date(1790000000000)/", "13/45/2020", None, rnd_text(r, 6)])}).encode() if r.random() < 0.8 else body_variants(r)
        return "POST", "/API/Actor.svc/participant/enrollment/", body, "application/json", headers
    if k < 0.915: return "GET", "/API/Actor.svc/participant/enrollment/" + quote(r.choice(["5001", "7001", "x", ""])), b"", None, headers
    if k < 0.92: return "GET", "/API/Actor.svc/participant/" + quote(r.choice(["5001", "7001", "0", "-1", "9" * 30, rnd_text(r, 4)])), b"", None, headers
    if k < 0.95: return "GET", "/API/Search.svc/Search/" + quote(r.choice(["1001", "2001", "x"])) + "/" + quote(r.choice(["a", "%", "_", rnd_text(r, 6)]) or "a"), b"", None, headers
    if k < 0.975:
        q = r.choice(["TouchPointID=301", "TouchPointID=401", "TouchPointID=x", ""]) + "&" + r.choice(["SubjectID=105001", "SubjectID=107001", "SubjectID=-1", "TouchPointResponseID=5001", ""])
        return "GET", "/API/TouchPoint.svc/" + r.choice(["ListTouchPoint", "GetTouchPoint", "ListTouchPointResponses", "GetTouchPointResponse"]) + "?" + q, b"", None, headers
    if k < 0.99:
        elements = [{"ElementID": r.choice([1, 2, 3, 99, "x"]), "ElementType": r.choice([4, 5, 9]), "Value": r.choice(["x", "11/20/2026", None, 5, rnd_text(r)]),
                     "ResponseElementChoices": r.choice([[{"TouchPointElementChoiceID": r.choice([11, 21, "x"])}], [], None])} for _ in range(r.randint(0, 4))]
        body = json.dumps({"TouchPointResponse": {"TouchPointID": r.choice([301, 401, "x"]), "SubjectID": r.choice([105001, 107001, None]),
                                                  "TouchPointResponseID": r.choice([None, 5001, "x"]), "ProgramID": r.choice([None, 1001, 1003]),
                                                  "ResponseElements": r.choice([elements, "x", None])}}).encode() if r.random() < 0.8 else body_variants(r)
        return "POST", "/API/TouchPoint.svc/" + r.choice(["TouchPointResponseAdd/", "TouchPointResponseUpdate/"]), body, "application/json", headers
    return r.choice(["GET", "DELETE", "PUT"]), "/API/" + r.choice(["Nope.svc", "Actor.svc", ".svc", "Security.svc/" + rnd_text(r, 300)]), b"", None, headers

def compass_request(r):
    """The Compass REST API: logins, records, edits, queries and result sets, with good and bad ids and bodies."""
    token = r.choice(compass_tokens * 3 + ["forged", "", "a.b.c"]) if compass_tokens else ""
    headers = {"Authorization": "Bearer " + token} if token else {}
    record = r.choice(["SAMPL00000001", "SAMPL0000000" + str(r.randint(1, 9)), rnd_text(r, 12), "33554433", "..", "%00", "NEW" + rnd_text(r, 8)])
    dbid = r.choice(["", "?useDbid=true", "?useDbid=" + rnd_text(r, 3)])
    names = ["Headline", "Severity", "Owner", "Priority", "State", "Resolution", "Project", "id", "dbid", "Note_Entry", "Nope", rnd_text(r, 6)]
    def fields():
        items = [{"name": r.choice(names), r.choice(["value", "valueAsList", "x"]): r.choice([rnd_value(r), rnd_text(r), ["a", 1], None, "3-Average", "beth.anglin", "Fixed"])}
                 for _ in range(r.randint(0, 4))]
        return json.dumps(r.choice([{"fields": items}, {}, {"fields": "x"}, [1]])).encode()
    def query_def():
        filters = [{"fieldPath": r.choice(names + ["history.action_name", "history.user_name", "Owner.fullname", "a.b.c.d"]),
                    "compOp": r.choice(["COMP_OP_EQ", "COMP_OP_IN", "COMP_OP_GT", "COMP_OP_BETWEEN", "COMP_OP_NOT_BETWEEN", "COMP_OP_X"]),
                    "values": r.choice([["[CURRENT_USER]"], [rnd_text(r)], [], ["a", "b"], "x"])} for _ in range(r.randint(0, 4))]
        node = {"boolOp": r.choice(["BOOL_OP_AND", "BOOL_OP_OR", "X"]), "fieldFilters": filters}
        for _ in range(r.randint(0, 2)): node = {"boolOp": "BOOL_OP_OR", "fieldFilters": [], "childFilterNodes": [node, node]}
        return {"name": r.choice(["q", "", rnd_text(r)]), "dbIdParent": r.choice(["16777218", "16777219", "1", ""]),
                "primaryEntityDefName": r.choice(["Defect", "defect", "Nope"]),
                "queryFieldDefs": [{"fieldPathName": r.choice(names), "isShown": r.choice([True, False, "x"]),
                                    "sortType": r.choice(["NO_SORT", "SORT_DESC", "X"])} for _ in range(r.randint(0, 4))],
                "filterNode": node}
    k = r.random()
    if k < 0.08: return "GET", "/ccmweb/rest/repos" + r.choice(["", "/"]), b"", None, {}
    if k < 0.16:
        body = json.dumps({"username": r.choice(["john.doe", "abel.tuter", "", rnd_text(r)]), "password": r.choice(["password", "x", ""]),
                           "repo": r.choice(["SampleRepository", "x"]), "db": r.choice(["SAMPL", "x"])}).encode() if r.random() < 0.8 else body_variants(r)
        return "POST", "/ccmweb/rest/authenticate" + r.choice(["", "/logoff"]), body, "application/json", headers
    if k < 0.26: return "GET", COMPASS + "/records/" + r.choice(["defect", "Defect", "nope"]) + r.choice(["", "/"]), b"", None, headers
    if k < 0.40: return "GET", COMPASS + "/records/defect/" + record + dbid, b"", None, headers
    if k < 0.48: return "GET", COMPASS + "/records/defect/" + record + "/fields/" + r.choice(names), b"", None, headers
    if k < 0.62:
        op = r.choice(["Edit", "Commit", "Revert", "x", ""])
        return "PATCH", COMPASS + "/records/defect/" + record + f"?operation={op}&actionName=" + r.choice(["Modify", "Resolve", "Close", "Delete", "Assign", rnd_text(r, 5)]), fields(), "application/json", headers
    if k < 0.70: return "POST", COMPASS + "/records/defect" + r.choice(["", "/"]) + "?operation=" + r.choice(["Edit", "Commit", "x"]), fields(), "application/json", headers
    if k < 0.74: return "DELETE", COMPASS + "/records/defect/" + record + "?actionName=" + r.choice(["Delete", "Modify", ""]), b"", None, headers
    if k < 0.78: return "GET", COMPASS + "/workspace/folders" + r.choice(["", "/16777218", "/16777219", "/1"]), b"", None, headers
    if k < 0.86: return "POST", COMPASS + "/workspace/queryDefs", json.dumps(query_def()).encode(), "application/json", headers
    if k < 0.93:
        options = r.choice([{"pageSize": "999"}, {"pageSize": -1}, {"resultSetOptions": {"pageSize": 10**30, "maxResultSetRows": "x"}}, {}])
        return "POST", COMPASS + "/workspace/queryDefs/" + r.choice(["16777301", "16777302", rnd_text(r, 5)]) + "/resultsets", json.dumps(options).encode(), "application/json", headers
    if k < 0.97:
        return "GET", COMPASS + "/workspace/queryDefs/" + r.choice(["16777301", "1"]) + "/resultsets/" + r.choice([rnd_text(r), "a.b", ""]) + "?pageNumber=" + r.choice(["1", "0", "-1", "99999999999999999999"]), b"", None, headers
    return "POST", COMPASS + "/query", json.dumps({"queryDef": query_def(), "resultSetOptions": {"pageSize": r.choice([1, "2", None])}}).encode(), "application/json", headers

def ws_frame(r, payload, masked=True, opcode=0x81):
    mask = bytes(r.randrange(256) for _ in range(4))
    size = len(payload)
    head = bytes([opcode]) + (bytes([(0x80 if masked else 0) | size]) if size < 126 else
                              bytes([(0x80 if masked else 0) | 126]) + size.to_bytes(2, "big") if size < 65536 else
                              bytes([(0x80 if masked else 0) | 127]) + size.to_bytes(8, "big"))
    return head + (mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if masked else payload)

def ws_upgrade(r, creds):
    """A WebSocket upgrade of a GraphQL endpoint (odd keys, versions and subprotocols), then random GraphQL socket
    messages and broken frames; the client then half-closes, so a socket that stays open ends."""
    auth = base64.b64encode(r.choice(creds).encode()).decode()
    lines = [f"GET {r.choice(['/graphql', '/api/now/graphql', '/api/now/table/incident', '/nope'])} HTTP/1.1", "Host: 127.0.0.1",
             "Upgrade: " + r.choice(["websocket", "WebSocket", "h2c", ""]), "Connection: " + r.choice(["Upgrade", "upgrade, keep-alive", "close"]),
             "Sec-WebSocket-Key: " + r.choice(["dGhlIHNhbXBsZSBub25jZQ==", "", "x" * 300, rnd_text(r, 10)]),
             "Sec-WebSocket-Version: " + r.choice(["13", "8", "", "99999999999999999999"])]
    if r.random() < 0.9:
        lines.append("Sec-WebSocket-Protocol: " + r.choice(["graphql-transport-ws", "graphql-ws", "chat", "graphql-ws, graphql-transport-ws", rnd_text(r, 20)]))
    if r.random() < 0.3: lines.append(f"Authorization: Basic {auth}")
    if r.random() < 0.2: lines.append("Origin: " + r.choice(["https://elsewhere.example", "null", rnd_text(r, 12)]))
    messages = [{"type": "connection_init", "payload": r.choice([{"Authorization": "Basic " + auth}, {"authorization": "Bearer x"}, None, "x", [1], {"headers": 5}])},
                {"type": r.choice(["subscribe", "start"]), "id": r.choice(["1", "", None, 5, "x" * 300]),
                 "payload": r.choice([{"query": r.choice(["subscription { taskAdded { id } }", "subscription { incident(since: -1) { sequence } }",
                                                          "subscription { incident(queryConditions: \"" + rnd_text(r, 20) + "\") { sequence record { number { value } } } }",
                                                          "{ allTasks { id } }", "{", "subscription { a: taskAdded { id } b: taskDeleted { id } }"]),
                                      "variables": r.choice([None, {}, "x", {"since": 10**30}])}, None, "x"])},
                {"type": r.choice(["complete", "stop", "ping", "pong", "connection_terminate", "ka", "next", ""]), "id": "1"}, {"id": "1"}]
    frames = b""
    for _ in range(r.randint(0, 6)):
        choice = r.random()
        if choice < 0.7:
            frames += ws_frame(r, json.dumps(r.choice(messages)).encode())
        elif choice < 0.8:
            frames += ws_frame(r, rnd_text(r, 30).encode("utf-8", "surrogatepass"), masked=r.random() < 0.5, opcode=r.choice([0x81, 0x82, 0x89, 0x8A, 0x88, 0x03, 0x0F]))
        elif choice < 0.9:
            frames += ws_frame(r, b"{" * r.randint(1, 70000))
        else:
            frames += bytes(r.randrange(256) for _ in range(r.randint(1, 40)))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogatepass") + frames

def raw_malformed(r, creds):
    auth = "Authorization: Basic " + base64.b64encode(r.choice(creds).encode()).decode() + "\r\n"
    return r.choice([
        b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n",
        ("CONNECT /api/now/table/incident HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n").encode(),
        ("POST /api/now/table/incident HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n" + auth + "\r\n-1\r\n{}\r\n0\r\n\r\n").encode(),
        ("POST /api/now/table/incident HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n" + auth + "\r\nzz\r\n").encode(),
        b"GET / HTTP/9.9\r\n\r\n", b"GARBAGE\r\n\r\n", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", b"GET /health\r\n\r\n",
        b"GET /api/now/table/incident HTTP/1.1\r\n" + b"X-A: " + b"a" * 100_000 + b"\r\n\r\n",
        b"GET /api/now/table/incident HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(2000)) + b"\r\n",
        b"GET /api/now/table/incident?" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/now/table/incident HTTP/1.1\nHost: x\n\n",
        b"GET /%ff%fe/../..%00 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/now/table/incident HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"GET /api/now/table/incident HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        ("PATCH /api/now/table/incident/cdb04ffc53247d4908555def767adca7 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n" + auth + "\r\n{\"short").encode(),
        b"GET /api/now/table/incident HTTP/1.1\r\nHost: x\r\n",
        b"",
    ])

def send(port, data, truncated, limit):
    s = socket.create_connection(("127.0.0.1", port), timeout=limit)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    start = time.monotonic()
    chunks = []
    try:
        s.sendall(data)
        if truncated:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError as error:
                # The server answered and closed first (Connection: close): read what it said.
                if error.errno != errno.ENOTCONN:
                    raise
        while True:
            remaining = limit - (time.monotonic() - start)
            if remaining <= 0: raise socket.timeout()
            s.settimeout(remaining)
            chunk = s.recv(65536)
            if not chunk: break
            chunks.append(chunk)
            blob = b"".join(chunks)
            # Enough when the head and a Content-Length body are in (some answers keep the connection).
            head_end = blob.find(b"\r\n\r\n")
            if head_end >= 0:
                length, chunked = None, False
                for line in blob[:head_end].split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"): length = int(line.split(b":")[1])
                    if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower(): chunked = True
                # A HEAD answer announces a length but carries no body.
                if data.startswith(b"HEAD "): break
                if length is not None and len(blob) >= head_end + 4 + length: break
                if chunked and blob.endswith(b"0\r\n\r\n"): break
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    blob = b"".join(chunks)
    status = int(blob.split(b" ", 2)[1]) if blob.startswith(b"HTTP/1.1 ") and len(blob.split(b" ", 2)) > 1 and blob.split(b" ", 2)[1].isdigit() else None
    return status, time.monotonic() - start, blob

def main():
    global r_global
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000, help="requests to send (default 20000)")
    ap.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    ap.add_argument("--binary", default=os.environ.get("DOCKET_BIN"), help="docketd to run (default: DOCKET_BIN or the release build)")
    ap.add_argument("--limit", type=float, default=5.0, help="slowest acceptable answer, in seconds (default 5)")
    ap.add_argument("--max-hangs", type=int, default=0,
                    help="answers slower than --limit to tolerate before failing (default 0; see README: known issue)")
    args = ap.parse_args()
    r = r_global = random.Random(args.seed)
    binary = args.binary or os.path.join(here, "..", "..", ".build", "release", "docketd")
    work = tempfile.mkdtemp(prefix="docket-fuzz-")
    out = open(os.path.join(work, "stdout"), "w+")
    err = open(os.path.join(work, "stderr"), "w+")
    # Throttled logins answer at once here: the suite tests how every request is handled, and a one-second wait
    # per refused login (the default, which Benchmarks/login-flood.sh measures) would only make it slower.
    server = subprocess.Popen([binary, "--demo", "--port", "0", "--data-dir", os.path.join(work, "data"), "--log-level", "error",
                               "--login-refusal-delay-ms", "0"],
                              stdout=out, stderr=err)
    failures, statuses, slowest = [], {}, 0.0
    try:
        port = None
        for _ in range(1800):  # up to 3 minutes (a loaded machine starts the demo slowly), or until it ends
            out.seek(0); line = out.read()
            if "listening on" in line:
                port = int(line.strip().rsplit(":", 1)[1]); break
            if server.poll() is not None: break
            time.sleep(0.1)
        if port is None: raise SystemExit("fuzz: docketd did not start: " + open(err.name).read())
        db = sqlite3.connect("file:" + os.path.join(work, "data", "docket.sqlite") + "?mode=ro", uri=True)
        def log_seq():
            # The notifier writes messages after the request that caused them was answered: they are no change of the
            # request being judged.
            return db.execute("SELECT COALESCE(MAX(seq), 0) FROM docket_event_log WHERE table_name <> 'sys_notification'").fetchone()[0]
        for user in ["john.doe", "abel.tuter"]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/ccmweb/rest/authenticate", method="POST",
                                             data=json.dumps({"username": user, "password": "password", "repo": "SampleRepository", "db": "SAMPL"}).encode(),
                                             headers={"Content-Type": "application/json"})
            compass_tokens.append(json.load(urllib.request.urlopen(request))["token"])
        for email, site, enterprise in [("john.doe@example.com", 101, ETO_ENTERPRISES[0]), ("abel.tuter@example.com", 201, ETO_ENTERPRISES[1])]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/API/Security.svc/SSOAuthenticate/", method="POST",
                                             data=json.dumps({"security": {"Email": email, "Password": "password"}}).encode(),
                                             headers={"Content-Type": "application/json"})
            token = json.load(urllib.request.urlopen(request))["SSOAuthenticateResult"]["SSOAuthToken"]
            eto_tokens["sso"].append(token)
            eto_tokens["site"].append(json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/API/Security.svc/SSOSiteLogin/{site}/{enterprise}/{token}/0")))
        for _ in range(2):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/realms/docket/protocol/openid-connect/token", method="POST",
                                             data=urllib.parse.urlencode({"grant_type": "password", "client_id": "datasync-starter-client",
                                                                          "username": "john.doe", "password": "password", "scope": "openid"}).encode(),
                                             headers={"Content-Type": "application/x-www-form-urlencoded"})
            grant = json.load(urllib.request.urlopen(request))
            oidc_tokens["access"].append(grant["access_token"])
            oidc_tokens["refresh"].append(grant["refresh_token"])
            oidc_tokens["id"].append(grant["id_token"])
        creds = ["john.doe:password"] * 4 + ["abel.tuter:password"] * 3 + ["beth.anglin:password", "abel.tuter:wrong", "nobody:x", ":", "john.doe:"]
        for i in range(args.requests):
            data, truncated = build(r, creds)
            before = log_seq()
            try:
                status, elapsed, blob = send(port, data, truncated, args.limit)
            except socket.timeout:
                failures.append(f"#{i}: no answer within {args.limit}s: {data[:200]!r}"); status, elapsed = "hang", args.limit
            except OSError as error:
                failures.append(f"#{i}: connection failed ({error}): {data[:200]!r}"); status, elapsed = "error", 0
            slowest = max(slowest, elapsed)
            statuses[status] = statuses.get(status, 0) + 1
            if isinstance(status, int) and status >= 500:
                failures.append(f"#{i}: {status}: {data[:300]!r} -> {blob[:300]!r}")
            if server.poll() is not None:
                failures.append(f"#{i}: docketd exited with {server.returncode} after {data[:300]!r}"); break
            if not (isinstance(status, int) and status < 400) and log_seq() != before:
                failures.append(f"#{i}: rejected ({status}) but the database changed: {data[:300]!r}")
            if len(failures) > 20: break
    finally:
        if server.poll() is None:
            server.terminate(); server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    total = sum(statuses.values())
    print(f"fuzz: seed {args.seed}, {total} requests, slowest answer {slowest:.2f}s")
    print("fuzz: statuses " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))))
    fives = sum(v for k, v in statuses.items() if isinstance(k, int) and k >= 500)
    print(f"fuzz: 5xx {fives}, exits {int(server.returncode not in (0, -15, None) and server.returncode != 0 and any('exited' in f for f in failures))}, "
          f"hangs {statuses.get('hang', 0)}, data changes {sum('database changed' in f for f in failures)}")
    for failure in failures: print("FAIL " + failure)
    hangs = sum("no answer within" in f for f in failures)
    counted = len(failures) - min(hangs, args.max_hangs)
    if hangs and hangs <= args.max_hangs:
        print(f"fuzz: {hangs} slow answer(s) tolerated by --max-hangs {args.max_hangs}")
    print(f"{total - counted} passed, {counted} failed")
    sys.exit(1 if counted else 0)

r_global = random.Random(0)
if __name__ == "__main__":
    main()
