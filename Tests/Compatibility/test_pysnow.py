"""The community client pysnow, unmodified, against a live docketd over HTTPS."""
import os
import tempfile
import unittest
import uuid

import pysnow
import requests

from common import (ADMIN, CA, CLIENT_ID, CLIENT_SECRET, INC1, ITIL, PAGING_ROWS, PAGING_TABLE, URL,
                    ensure_paging_records)

RUN = uuid.uuid4().hex[:12]
HOST = URL.split("://", 1)[1]


def setUpModule():
    ensure_paging_records(RUN)


def client(auth=ITIL):
    session = requests.Session()
    session.auth = auth
    session.verify = CA
    return pysnow.Client(host=HOST, session=session, use_ssl=True)


class TableAPI(unittest.TestCase):
    def test_crud_on_incident(self):
        incidents = client().resource(api_path="/table/incident")
        created = incidents.create(payload={"short_description": f"pysnow {RUN}", "impact": "1"}).one()
        sys_id = created["sys_id"]
        self.assertTrue(created["number"].startswith("INC"))
        self.assertEqual(created["priority"], "3")  # impact 1 x urgency 3
        fetched = incidents.get(query={"sys_id": sys_id}).one()
        self.assertEqual(fetched["short_description"], f"pysnow {RUN}")
        updated = incidents.update(query={"sys_id": sys_id}, payload={"short_description": f"pysnow {RUN} v2"}).one()
        self.assertEqual(updated["short_description"], f"pysnow {RUN} v2")
        self.assertEqual(incidents.delete(query={"sys_id": sys_id})["status"], "record deleted")
        self.assertEqual(incidents.get(query={"sys_id": sys_id}).all(), [])

    def test_query_builder(self):
        incidents = client().resource(api_path="/table/incident")
        query = pysnow.QueryBuilder().field("priority").equals("1").OR().field("priority").equals("2") \
            .AND().field("number").order_ascending()
        numbers = [r["number"] for r in incidents.get(query=query, fields=["number", "priority"]).all()]
        self.assertGreater(len(numbers), 0)
        self.assertEqual(numbers, sorted(numbers))

    def test_paging_through_2500_records(self):
        items = client(ADMIN).resource(api_path=f"/table/{PAGING_TABLE}")
        items.parameters.limit = 250
        rows = list(items.get(query={"u_run": RUN}, fields=["u_index"], stream=True).all())
        self.assertEqual(sorted(int(r["u_index"]) for r in rows), list(range(PAGING_ROWS)))

    def test_display_values(self):
        incidents = client().resource(api_path="/table/incident")
        incidents.parameters.display_value = True
        record = incidents.get(query={"sys_id": INC1}).one()
        self.assertEqual(record["priority"], "3 - Moderate")
        self.assertIsInstance(record["caller_id"], dict)
        self.assertTrue(record["caller_id"]["display_value"])


class Attachments(unittest.TestCase):
    def test_upload_and_delete(self):
        incidents = client().resource(api_path="/table/incident")
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as handle:
            handle.write(f"pysnow attachment {RUN}".encode())
            path = handle.name
        try:
            response = incidents.attachments.upload(INC1, path, name=f"pysnow-{RUN}.txt")
            uploaded = response.one()
            self.assertEqual(uploaded["file_name"], f"pysnow-{RUN}.txt")
            listed = [a["file_name"] for a in incidents.attachments.get(INC1)]
            self.assertIn(f"pysnow-{RUN}.txt", listed)
            download = requests.get(uploaded["download_link"], auth=ITIL, verify=CA)
            self.assertEqual(download.content, f"pysnow attachment {RUN}".encode())
            incidents.attachments.delete(uploaded["sys_id"])
            listed = [a["file_name"] for a in incidents.attachments.get(INC1)]
            self.assertNotIn(f"pysnow-{RUN}.txt", listed)
        finally:
            os.unlink(path)


class OAuth(unittest.TestCase):
    def test_token_and_refresh(self):
        oauth = pysnow.OAuthClient(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, host=HOST, use_ssl=True)
        token = oauth.generate_token("john.doe", "password")
        self.assertEqual(token["token_type"], "Bearer")
        self.assertIn(token["scope"], ("useraccount", ["useraccount"]))  # requests-oauthlib splits scopes
        oauth.set_token(token)
        record = oauth.resource(api_path="/table/incident").get(query={"sys_id": INC1}).one()
        self.assertEqual(record["number"], "INC0010001")
        refreshed = requests.post(f"{URL}/oauth_token.do", verify=CA, data={
            "grant_type": "refresh_token", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "refresh_token": token["refresh_token"]}).json()
        self.assertNotEqual(refreshed["access_token"], token["access_token"])
        self.assertEqual(refreshed["refresh_token"], token["refresh_token"])
        bad = requests.post(f"{URL}/oauth_token.do", verify=CA, data={
            "grant_type": "refresh_token", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "refresh_token": "forged"})
        self.assertEqual(bad.status_code, 401)
        self.assertEqual(bad.json(), {"error_description": "access_denied", "error": "server_error"})

    def test_bad_password(self):
        oauth = pysnow.OAuthClient(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, host=HOST, use_ssl=True)
        with self.assertRaises(Exception):
            oauth.generate_token("john.doe", "wrong")


if __name__ == "__main__":
    unittest.main(verbosity=2)
