"""docketd's OpenID Connect provider through an independent relying party: authlib (from PyPI, not Docket's
code) runs discovery, the authorization code flow with PKCE through the web UI's sign-in form, the code exchange,
ID-token validation against the published JWK Set (signature, iss, aud, nonce, at_hash), userinfo, refresh token
rotation and reuse detection, revocation, introspection and RP-initiated logout; the public client is refused
without PKCE, with a wrong verifier or an unregistered redirect URI; the DataSync showcase's operations run with
the resulting bearer token over HTTP and over both WebSocket subprotocols."""
import asyncio
import html
import re
import secrets
import ssl
import unittest
from urllib.parse import parse_qs, urljoin, urlparse

import warnings

import requests
from authlib.integrations.requests_client import OAuth2Session

# authlib's JOSE module still validates ID tokens with OpenID's rules (CodeIDToken: at_hash, nonce, aud); it
# announces its move to joserfc.
warnings.filterwarnings("ignore", message="authlib.jose module is deprecated")
from authlib.jose import JsonWebKey, jwt  # noqa: E402
from authlib.oidc.core import CodeIDToken  # noqa: E402
from gql import Client, gql  # noqa: E402
from gql.transport.requests import RequestsHTTPTransport  # noqa: E402
from gql.transport.websockets import WebsocketsTransport  # noqa: E402

from common import CA, CLIENT_ID, CLIENT_SECRET, ITIL, URL

PUBLIC_CLIENT = "datasync-starter-client"
REDIRECT = "http://localhost:8765/callback"
ISSUER = URL + "/realms/docket"


def discovery():
    response = requests.get(ISSUER + "/.well-known/openid-configuration", verify=CA)
    response.raise_for_status()
    return response.json()


def sign_in_through_browser(authorization_url, user=ITIL):
    """What a browser does: follows the provider to the web UI's sign-in page, submits the form, and is sent to
    the app's redirect URI; returns that final URI (which carries the code)."""
    browser = requests.Session()
    browser.verify = CA
    response = browser.get(authorization_url, allow_redirects=False)
    assert response.status_code == 303, response.text
    page = browser.get(urljoin(URL, response.headers["Location"]), allow_redirects=False)
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    fields.update({"user_name": user[0], "password": user[1]})
    fields = {name: html.unescape(value) for name, value in fields.items()}
    posted = browser.post(URL + "/app/login", data=fields, allow_redirects=False)
    assert posted.status_code == 303, posted.text
    back = browser.get(urljoin(URL, posted.headers["Location"]), allow_redirects=False)
    assert back.status_code == 302, back.text
    return back.headers["Location"]


def code_flow(test):
    """Runs the authorization code flow with PKCE as authlib's relying party; returns (session, token, nonce)."""
    metadata = discovery()
    session = OAuth2Session(PUBLIC_CLIENT, redirect_uri=REDIRECT, scope="openid profile email", code_challenge_method="S256")
    session.verify = CA
    verifier = secrets.token_urlsafe(48)
    nonce = secrets.token_urlsafe(16)
    url, state = session.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier, nonce=nonce)
    callback = sign_in_through_browser(url)
    test.assertTrue(callback.startswith(REDIRECT + "?"), callback)
    test.assertEqual(parse_qs(urlparse(callback).query)["state"], [state])
    token = session.fetch_token(metadata["token_endpoint"], authorization_response=callback, code_verifier=verifier)
    return session, token, nonce


class OpenIDProvider(unittest.TestCase):
    def test_discovery_has_what_relying_parties_require(self):
        metadata = discovery()
        self.assertEqual(metadata["issuer"], ISSUER)
        for key in ("authorization_endpoint", "token_endpoint", "jwks_uri", "response_types_supported",
                    "subject_types_supported", "id_token_signing_alg_values_supported", "userinfo_endpoint",
                    "end_session_endpoint", "revocation_endpoint", "introspection_endpoint"):
            self.assertIn(key, metadata)
        self.assertIn("RS256", metadata["id_token_signing_alg_values_supported"])
        self.assertEqual(metadata["code_challenge_methods_supported"], ["S256"])
        legacy = requests.get(URL + "/auth/realms/docket/.well-known/openid-configuration", verify=CA).json()
        self.assertEqual(legacy["issuer"], URL + "/auth/realms/docket")

    def test_code_flow_id_token_userinfo_and_bearer(self):
        metadata = discovery()
        session, token, nonce = code_flow(self)
        keys = JsonWebKey.import_key_set(requests.get(metadata["jwks_uri"], verify=CA).json())
        claims = jwt.decode(token["id_token"], keys, claims_cls=CodeIDToken,
                            claims_options={"iss": {"essential": True, "value": ISSUER}},
                            claims_params={"nonce": nonce, "client_id": PUBLIC_CLIENT, "access_token": token["access_token"]})
        claims.validate(leeway=5)
        self.assertEqual(claims["preferred_username"], ITIL[0])
        access = jwt.decode(token["access_token"], keys)
        access.validate(leeway=5)
        self.assertEqual((access["iss"], access["azp"], access["typ"]), (ISSUER, PUBLIC_CLIENT, "Bearer"))
        info = session.get(metadata["userinfo_endpoint"]).json()
        self.assertEqual((info["sub"], info["preferred_username"]), (claims["sub"], ITIL[0]))
        rows = session.get(URL + "/api/now/table/sys_user", params={"sysparm_query": "user_name=" + ITIL[0],
                                                                     "sysparm_fields": "user_name"}).json()["result"]
        self.assertEqual(rows, [{"user_name": ITIL[0]}])

    def test_refresh_rotation_and_reuse_detection(self):
        metadata = discovery()
        session, token, _ = code_flow(self)
        first_refresh = token["refresh_token"]
        renewed = session.refresh_token(metadata["token_endpoint"])
        self.assertNotEqual(renewed["refresh_token"], first_refresh)
        self.assertEqual(session.get(metadata["userinfo_endpoint"]).status_code, 200)
        replay = requests.post(metadata["token_endpoint"], verify=CA, data={
            "grant_type": "refresh_token", "client_id": PUBLIC_CLIENT, "refresh_token": first_refresh})
        self.assertEqual((replay.status_code, replay.json()["error"]), (400, "invalid_grant"))
        # The replay ended the session: the newest tokens stop too.
        self.assertEqual(session.get(metadata["userinfo_endpoint"]).status_code, 401)
        after = requests.post(metadata["token_endpoint"], verify=CA, data={
            "grant_type": "refresh_token", "client_id": PUBLIC_CLIENT, "refresh_token": renewed["refresh_token"]})
        self.assertEqual(after.json()["error"], "invalid_grant")

    def test_revocation_and_introspection(self):
        metadata = discovery()
        session, token, _ = code_flow(self)
        resource_server = OAuth2Session(CLIENT_ID, CLIENT_SECRET)
        resource_server.verify = CA
        active = resource_server.introspect_token(metadata["introspection_endpoint"], token=token["access_token"]).json()
        self.assertTrue(active["active"])
        self.assertEqual((active["username"], active["client_id"]), (ITIL[0], PUBLIC_CLIENT))
        session.revoke_token(metadata["revocation_endpoint"], token=token["refresh_token"], token_type_hint="refresh_token")
        self.assertFalse(resource_server.introspect_token(metadata["introspection_endpoint"],
                                                          token=token["access_token"]).json()["active"])
        self.assertEqual(session.get(URL + "/api/now/table/incident", params={"sysparm_limit": 1}).status_code, 401)
        public = OAuth2Session(PUBLIC_CLIENT)
        public.verify = CA
        self.assertEqual(public.introspect_token(metadata["introspection_endpoint"], token="x").status_code, 401)

    def test_rp_initiated_logout(self):
        metadata = discovery()
        session, token, _ = code_flow(self)
        out = requests.get(metadata["end_session_endpoint"], verify=CA, allow_redirects=False, params={
            "id_token_hint": token["id_token"], "post_logout_redirect_uri": "http://localhost:8765/bye", "state": "s1"})
        self.assertEqual(out.status_code, 302)
        self.assertEqual(out.headers["Location"], "http://localhost:8765/bye?state=s1")
        self.assertEqual(session.get(metadata["userinfo_endpoint"]).status_code, 401)

    def test_public_client_refusals(self):
        metadata = discovery()
        endpoint = metadata["authorization_endpoint"]
        no_pkce = requests.get(endpoint, verify=CA, allow_redirects=False, params={
            "response_type": "code", "client_id": PUBLIC_CLIENT, "redirect_uri": REDIRECT, "state": "s"})
        self.assertEqual(no_pkce.status_code, 302)
        self.assertEqual(parse_qs(urlparse(no_pkce.headers["Location"]).query)["error"], ["invalid_request"])
        wrong_redirect = requests.get(endpoint, verify=CA, allow_redirects=False, params={
            "response_type": "code", "client_id": PUBLIC_CLIENT, "redirect_uri": "https://evil.example/cb",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"})
        self.assertEqual(wrong_redirect.status_code, 400)
        self.assertNotIn("Location", wrong_redirect.headers)
        session = OAuth2Session(PUBLIC_CLIENT, redirect_uri=REDIRECT, scope="openid", code_challenge_method="S256")
        session.verify = CA
        url, _ = session.create_authorization_url(endpoint, code_verifier=secrets.token_urlsafe(48))
        callback = sign_in_through_browser(url)
        code = parse_qs(urlparse(callback).query)["code"][0]
        wrong = requests.post(metadata["token_endpoint"], verify=CA, data={
            "grant_type": "authorization_code", "client_id": PUBLIC_CLIENT, "code": code, "redirect_uri": REDIRECT,
            "code_verifier": secrets.token_urlsafe(48)})
        self.assertEqual((wrong.status_code, wrong.json()["error"]), (400, "invalid_grant"))


class ShowcaseWithOpenIDToken(unittest.TestCase):
    """The DataSync showcase's operations with the bearer token the provider issued (as the app does after its
    Keycloak login), over HTTP and over both WebSocket subprotocols."""

    def test_operations(self):
        _, token, _ = code_flow(self)
        bearer = "Bearer " + token["access_token"]
        transport = RequestsHTTPTransport(url=URL + "/graphql", verify=CA, headers={"Authorization": bearer}, retries=0)
        created = Client(transport=transport, fetch_schema_from_transport=False).execute(gql(
            'mutation { createTask(title: "oidc", description: "d", status: OPEN) { id version } }'))
        self.assertEqual(created["createTask"]["version"], 1)

        async def over_socket(subprotocol, payload):
            context = ssl.create_default_context(cafile=CA)
            socket = WebsocketsTransport(url=URL.replace("https://", "wss://") + "/graphql", ssl=context,
                                         init_payload=payload, subprotocols=[subprotocol])
            async with Client(transport=socket) as session:
                listed = await session.execute(gql("{ allTasks { id } }"))
                self.assertIn(created["createTask"]["id"], [task["id"] for task in listed["allTasks"]])

        for subprotocol, payload in (("graphql-transport-ws", {"Authorization": bearer}),
                                     ("graphql-ws", {"headers": {"Authorization": bearer}})):
            with self.subTest(subprotocol=subprotocol):
                asyncio.run(asyncio.wait_for(over_socket(subprotocol, payload), 30))
