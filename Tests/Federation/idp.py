#!/usr/bin/env python3
"""An OpenID provider that Docket did not write, for the federation test: authlib's authorization server (Flask
integration) with the password and client_credentials grants, issuing RFC 9068 JWT access tokens (authlib's
JWTBearerTokenGenerator, RS256, Keycloak-style claims), with discovery and a JWK Set.

    python3 Tests/Federation/idp.py            # prints "idp listening on http://127.0.0.1:PORT"

Test hooks (this is a test double for a company's provider): POST /admin/rotate makes a new signing key (the old
one stays published), POST /admin/mint signs a token with given claims (an expired one, another audience).
"""
import base64
import hashlib
import json
import secrets
import sys
import threading
import time
from urllib.parse import urlencode

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from flask import Flask, jsonify, request
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from werkzeug.serving import make_server

USERS = {
    "john.doe": {"password": "idp-secret", "email": "john.doe@example.com", "roles": ["itil"]},
    "newperson": {"password": "idp-secret", "email": "newperson@example.com", "roles": ["itil", "no-such-role"]},
}
CLIENTS = {"docket-federation": {"secret": "federation-secret", "audience": ["docket-api", "docket-federation"]},
           "other-app": {"secret": "other-secret", "audience": ["other-api"]},
           # docketd's own client, for its web UI's "Sign in with …" (authorization code + PKCE).
           "docket-web": {"secret": "web-secret", "audience": ["docket-api"], "redirect": "http://127.0.0.1:"}}
# Who is signed in at the provider (its own login page is not the point of this test double).
signed_in = {"user": "john.doe", "refuse": False}
codes = {}

keys = [RSAKey.generate_key(2048, parameters={"kid": "key-1", "use": "sig", "alg": "RS256"}, private=True)]
issuer = ""


class Client(ClientMixin):
    def __init__(self, client_id):
        self.client_id = client_id

    def get_client_id(self): return self.client_id
    def get_default_redirect_uri(self): return None
    def get_allowed_scope(self, scope): return scope or ""
    def check_redirect_uri(self, redirect_uri): return False
    def check_client_secret(self, client_secret): return CLIENTS[self.client_id]["secret"] == client_secret
    def check_endpoint_auth_method(self, method, endpoint): return method in ("client_secret_basic", "client_secret_post")
    def check_response_type(self, response_type): return False
    def check_grant_type(self, grant_type): return grant_type in ("password", "client_credentials")


class User:
    def __init__(self, name): self.name = name
    def get_user_id(self): return self.name


class PasswordGrant(grants.ResourceOwnerPasswordCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    def authenticate_user(self, username, password):
        user = USERS.get(username)
        return User(username) if user and user["password"] == password else None


class TokenGenerator(JWTBearerTokenGenerator):
    def get_jwks(self):
        # The newest key signs.
        return KeySet([keys[-1]]).as_dict(private=True)

    def get_audiences(self, client, user, scope):
        return CLIENTS[client.client_id]["audience"]

    def get_extra_claims(self, client, grant_type, user, scope):
        if user is None:
            return {}
        return {"preferred_username": user.name, "email": USERS[user.name]["email"], "email_verified": True,
                "realm_access": {"roles": USERS[user.name]["roles"]}}


app = Flask(__name__)
server = AuthorizationServer(app, query_client=lambda client_id: Client(client_id) if client_id in CLIENTS else None,
                             save_token=lambda token, request: None)
server.register_grant(PasswordGrant)
server.register_grant(grants.ClientCredentialsGrant)


@app.get("/.well-known/openid-configuration")
def discovery():
    return jsonify({"issuer": issuer, "jwks_uri": issuer + "/jwks", "token_endpoint": issuer + "/token",
                    "authorization_endpoint": issuer + "/authorize",
                    "grant_types_supported": ["password", "client_credentials"],
                    "id_token_signing_alg_values_supported": ["RS256"], "subject_types_supported": ["public"],
                    "response_types_supported": ["code"]})


@app.get("/jwks")
def jwks():
    return jsonify(KeySet(keys).as_dict(private=False))


@app.get("/authorize")
def authorize():
    """The authorization code flow for docketd's client: the signed-in user agrees at once."""
    args = request.args
    client = CLIENTS.get(args.get("client_id", ""), {})
    redirect = args.get("redirect_uri", "")
    if "redirect" not in client or not redirect.startswith(client["redirect"]):
        return "unknown client or redirect_uri", 400
    def back(**fields):
        fields["state"] = args.get("state", "")
        return "", 302, {"Location": redirect + "?" + urlencode(fields)}
    if signed_in["refuse"]:
        return back(error="access_denied")
    if args.get("response_type") != "code" or args.get("code_challenge_method") != "S256" or not args.get("code_challenge"):
        return back(error="invalid_request")
    code = secrets.token_urlsafe(24)
    codes[code] = {"client": args["client_id"], "redirect": redirect, "nonce": args.get("nonce"), "challenge": args["code_challenge"],
                   "user": signed_in["user"]}
    return back(code=code)


def code_exchange():
    form = request.form
    auth = request.authorization
    client_id = auth.username if auth else form.get("client_id", "")
    secret = auth.password if auth else form.get("client_secret", "")
    if client_id not in CLIENTS or CLIENTS[client_id]["secret"] != secret:
        return jsonify({"error": "invalid_client"}), 401
    grant = codes.pop(form.get("code", ""), None)
    verifier = form.get("code_verifier", "")
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    if not grant or grant["client"] != client_id or grant["redirect"] != form.get("redirect_uri") or grant["challenge"] != challenge:
        return jsonify({"error": "invalid_grant"}), 400
    now = int(time.time())
    user = grant["user"]
    claims = {"iss": issuer, "sub": user, "aud": client_id, "iat": now, "exp": now + 300, "nonce": grant["nonce"],
              "preferred_username": user, "email": USERS[user]["email"], "email_verified": True,
              "realm_access": {"roles": USERS[user]["roles"]}}
    id_token = jwt.encode({"alg": "RS256", "kid": keys[-1].kid}, claims, keys[-1])
    return jsonify({"access_token": secrets.token_urlsafe(24), "token_type": "Bearer", "expires_in": 300, "id_token": id_token})


@app.post("/token")
def token():
    if request.form.get("grant_type") == "authorization_code":
        return code_exchange()
    return server.create_token_response()


@app.post("/admin/sign-in")
def sign_in():
    signed_in.update(request.get_json())
    return jsonify(signed_in)


@app.post("/admin/rotate")
def rotate():
    keys.append(RSAKey.generate_key(2048, parameters={"kid": f"key-{len(keys) + 1}", "use": "sig", "alg": "RS256"}, private=True))
    return jsonify({"kid": keys[-1].kid})


@app.post("/admin/mint")
def mint():
    claims = {"iss": issuer, "iat": int(time.time()), "exp": int(time.time()) + 300, "aud": "docket-api", "sub": "x"}
    asked = request.get_json()
    key = keys[-1]
    if asked.pop("foreign", False):
        # Signed by a key this provider never published.
        key = RSAKey.generate_key(2048, parameters={"kid": "stranger", "alg": "RS256"}, private=True)
    claims.update(asked)
    return jsonify({"token": jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)})


def main():
    global issuer
    # `--host-name localhost` names the issuer by another host than the 127.0.0.1 it listens on: to a browser, a
    # site other than a docketd at 127.0.0.1.
    host = sys.argv[sys.argv.index("--host-name") + 1] if "--host-name" in sys.argv else "127.0.0.1"
    http = make_server("127.0.0.1", 0, app, threaded=True)
    issuer = f"http://{host}:{http.server_port}"
    server.register_token_generator("default", TokenGenerator(issuer=issuer))
    print(f"idp listening on {issuer}", flush=True)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        sys.stdin.read()
    finally:
        http.shutdown()


if __name__ == "__main__":
    main()
