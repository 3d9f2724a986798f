"""Shared settings for the compatibility suite: the live docketd's URL and the CA that signed its
certificate come from the environment (Tests/Compatibility/run.sh sets them)."""
import base64
import json
import os
import uuid

import requests

URL = os.environ["DOCKET_URL"].rstrip("/")
CA = os.environ["DOCKET_CA"]
ADMIN = ("admin", "admin")
ITIL = ("john.doe", "password")
CLIENT_ID = "docket-demo"
CLIENT_SECRET = "docket-demo-secret"
# INC0010001 of the demo data.
INC1 = "cdb04ffc53247d4908555def767adca7"
PAGING_TABLE = "u_compat_item"
PAGING_ROWS = 2500


def admin_session():
    session = requests.Session()
    session.auth = ADMIN
    session.verify = CA
    session.headers.update({"Accept": "application/json"})
    return session


def ensure_paging_records(run_id):
    """Creates the custom table (schema administration) once, then PAGING_ROWS records tagged with run_id,
    posted through the Batch API 250 at a time."""
    session = admin_session()
    existing = session.get(f"{URL}/api/now/table/sys_db_object", params={"name": PAGING_TABLE}).json()["result"]
    if not existing:
        r = session.post(f"{URL}/api/now/table/sys_db_object", json={"name": PAGING_TABLE, "label": "Compat item"})
        assert r.status_code == 201, r.text
        for element, kind in (("u_run", "string"), ("u_index", "integer")):
            r = session.post(f"{URL}/api/now/table/sys_dictionary",
                             json={"name": PAGING_TABLE, "element": element, "internal_type": kind})
            assert r.status_code == 201, r.text
    for start in range(0, PAGING_ROWS, 250):
        requests_ = []
        for index in range(start, min(start + 250, PAGING_ROWS)):
            body = json.dumps({"u_run": run_id, "u_index": index}).encode()
            requests_.append({"id": str(index), "method": "POST", "url": f"/api/now/table/{PAGING_TABLE}",
                              "headers": [{"name": "Content-Type", "value": "application/json"},
                                          {"name": "Accept", "value": "application/json"}],
                              "body": base64.b64encode(body).decode()})
        r = session.post(f"{URL}/api/now/v1/batch", json={"batch_request_id": str(uuid.uuid4()),
                                                           "rest_requests": requests_})
        assert r.status_code == 200, r.text
        data = r.json()
        assert not data["unserviced_requests"], data["unserviced_requests"]
        assert all(s["status_code"] == 201 for s in data["serviced_requests"])
