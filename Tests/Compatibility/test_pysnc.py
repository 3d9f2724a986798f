"""ServiceNow's own Python client, pysnc, unmodified, against a live docketd over HTTPS."""
import time
import unittest
import uuid

import pysnc
import requests
from pysnc import ServiceNowClient, ServiceNowPasswordGrantFlow
from pysnc.exceptions import AuthenticationException

from common import (ADMIN, CA, CLIENT_ID, CLIENT_SECRET, INC1, ITIL, PAGING_ROWS, PAGING_TABLE, URL,
                    admin_session, ensure_paging_records)

RUN = uuid.uuid4().hex[:12]


def setUpModule():
    ensure_paging_records(RUN)


class TableAPI(unittest.TestCase):
    def setUp(self):
        self.client = ServiceNowClient(URL, ITIL, verify=CA)

    def test_crud_on_incident(self):
        gr = self.client.GlideRecord("incident")
        gr.initialize()
        gr.short_description = f"pysnc crud {RUN}"
        gr.urgency = "2"
        sys_id = gr.insert()
        self.assertTrue(sys_id)
        self.assertTrue(gr.get_value("number").startswith("INC"))

        read = self.client.GlideRecord("incident")
        self.assertTrue(read.get(sys_id))
        self.assertEqual(read.short_description, f"pysnc crud {RUN}")
        self.assertEqual(read.get_display_value("urgency"), "2 - Medium")

        read.short_description = f"pysnc crud updated {RUN}"
        read.state = "2"
        self.assertTrue(read.update())
        again = self.client.GlideRecord("incident")
        self.assertTrue(again.get(sys_id))
        self.assertEqual(again.short_description, f"pysnc crud updated {RUN}")
        self.assertEqual(again.get_display_value("state"), "In Progress")

        self.assertTrue(again.delete())
        gone = self.client.GlideRecord("incident")
        self.assertFalse(gone.get(sys_id))

    def test_encoded_queries(self):
        gr = self.client.GlideRecord("incident")
        gr.add_encoded_query("priority=1^ORpriority=2")
        gr.order_by("number")
        gr.query()
        numbers = [r.number for r in gr]
        self.assertGreater(len(numbers), 0)
        self.assertEqual(numbers, sorted(numbers))
        check = self.client.GlideRecord("incident")
        check.add_query("priority", "IN", "1,2")
        check.query()
        self.assertEqual(len(check), len(numbers))
        # A condition built with pysnc's query builder, including an OR condition.
        built = self.client.GlideRecord("incident")
        condition = built.add_query("priority", "1")
        condition.add_or_condition("priority", "2")
        built.query()
        self.assertEqual(len(built), len(numbers))

    def test_paging_through_2500_records(self):
        # Custom tables have no access rules yet, so only the admin reads them.
        gr = ServiceNowClient(URL, ADMIN, verify=CA).GlideRecord(PAGING_TABLE, batch_size=100)
        gr.add_query("u_run", RUN)
        gr.order_by("u_index")
        gr.query()
        self.assertEqual(len(gr), PAGING_ROWS)
        seen = [int(r.u_index) for r in gr]
        self.assertEqual(seen, list(range(PAGING_ROWS)))

    def test_display_values(self):
        gr = self.client.GlideRecord("incident")
        self.assertTrue(gr.get(INC1))
        # Read as the same user: display values of dates are in the reader's time zone.
        raw = requests.get(f"{URL}/api/now/table/incident/{INC1}", auth=ITIL, verify=CA,
                           headers={"Accept": "application/json"},
                           params={"sysparm_display_value": "all"}).json()["result"]
        for field in ("caller_id", "assigned_to", "priority", "state", "opened_at"):
            self.assertEqual(gr.get_value(field), raw[field]["value"], field)
            self.assertEqual(gr.get_display_value(field), raw[field]["display_value"], field)
        self.assertEqual(gr.get_display_value("priority"), "3 - Moderate")

    def test_forged_token_is_refused(self):
        session = requests.Session()
        session.headers["Authorization"] = "Bearer forged-token"
        client = ServiceNowClient(URL, session, verify=CA)
        gr = client.GlideRecord("incident")
        with self.assertRaises(AuthenticationException):
            gr.query()


class Attachments(unittest.TestCase):
    def test_upload_list_download_delete(self):
        client = ServiceNowClient(URL, ITIL, verify=CA)
        gr = client.GlideRecord("incident")
        self.assertTrue(gr.get(INC1))
        content = b"docket attachment " + RUN.encode() + bytes(range(256))
        location = gr.add_attachment(f"pysnc-{RUN}.bin", content, "application/octet-stream")
        self.assertIn("/api/now/v1/attachment/", location)  # pysnc uploads through v1: the version is kept
        self.assertTrue(location.endswith("/file"))

        attachments = gr.get_attachments()
        names = [a.file_name for a in attachments]
        self.assertIn(f"pysnc-{RUN}.bin", names)
        for attachment in attachments:
            if attachment.file_name == f"pysnc-{RUN}.bin":
                self.assertEqual(attachment.read(), content)
                self.assertEqual(attachment.size_bytes, str(len(content)))
                attachment.delete()
        names = [a.file_name for a in gr.get_attachments()]
        self.assertNotIn(f"pysnc-{RUN}.bin", names)


class Batch(unittest.TestCase):
    def test_update_multiple_and_delete_multiple(self):
        client = ServiceNowClient(URL, ITIL, verify=CA)
        ids = []
        for index in range(12):
            gr = client.GlideRecord("incident")
            gr.initialize()
            gr.short_description = f"batch {RUN} {index}"
            ids.append(gr.insert())
        gr = client.GlideRecord("incident")
        gr.add_query("short_description", "STARTSWITH", f"batch {RUN}")
        gr.query()
        self.assertEqual(len(gr), 12)
        for record in gr:
            record.urgency = "1"
        self.assertTrue(gr.update_multiple())
        check = client.GlideRecord("incident")
        check.add_query("short_description", "STARTSWITH", f"batch {RUN}")
        check.add_query("urgency", "1")
        check.query()
        self.assertEqual(len(check), 12)
        remove = client.GlideRecord("incident")
        remove.add_query("short_description", "STARTSWITH", f"batch {RUN}")
        self.assertTrue(remove.delete_multiple())
        after = client.GlideRecord("incident")
        after.add_query("short_description", "STARTSWITH", f"batch {RUN}")
        after.query()
        self.assertEqual(len(after), 0)


class OAuth(unittest.TestCase):
    def test_password_grant(self):
        client = ServiceNowClient(URL, ServiceNowPasswordGrantFlow("john.doe", "password", CLIENT_ID, CLIENT_SECRET),
                                  verify=CA)
        gr = client.GlideRecord("incident")
        self.assertTrue(gr.get(INC1))
        self.assertEqual(gr.number, "INC0010001")

    def test_expired_token_is_refreshed(self):
        # A client whose access tokens live two seconds, registered by the admin through the Table API.
        client_id = f"short-{RUN}"
        r = admin_session().post(f"{URL}/api/now/table/oauth_entity",
                                 json={"name": "short lived", "client_id": client_id, "client_secret": "s3cret",
                                       "access_token_lifespan": "2"})
        self.assertEqual(r.status_code, 201, r.text)
        self.assertEqual(r.json()["result"]["client_secret"], "********")  # a password field reads as its mask
        client = ServiceNowClient(URL, ServiceNowPasswordGrantFlow("john.doe", "password", client_id, "s3cret"),
                                  verify=CA)
        first = client.session.token["access_token"]
        gr = client.GlideRecord("incident")
        self.assertTrue(gr.get(INC1))
        time.sleep(2.5)
        # The old token is now refused by the server...
        r = requests.get(f"{URL}/api/now/table/incident/{INC1}", headers={"Authorization": f"Bearer {first}"},
                         verify=CA)
        self.assertEqual(r.status_code, 401)
        # ...and pysnc refreshes it with the refresh_token grant before its next call.
        again = client.GlideRecord("incident")
        self.assertTrue(again.get(INC1))
        self.assertNotEqual(client.session.token["access_token"], first)

    def test_wrong_secret_is_refused(self):
        with self.assertRaises(Exception):
            ServiceNowClient(URL, ServiceNowPasswordGrantFlow("john.doe", "password", CLIENT_ID, "wrong"), verify=CA)


class Aggregate(unittest.TestCase):
    def test_counts(self):
        client = ServiceNowClient(URL, ITIL, verify=CA)
        gr = client.GlideRecord("incident")
        gr.add_query("active", "true")
        gr.query()
        r = client.session.get(f"{URL}/api/now/stats/incident",
                               params={"sysparm_count": "true", "sysparm_query": "active=true"})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["result"]["stats"]["count"], str(len(gr)))
        grouped = client.session.get(f"{URL}/api/now/stats/incident",
                                     params={"sysparm_count": "true", "sysparm_group_by": "priority",
                                             "sysparm_display_value": "true"}).json()["result"]
        total = client.session.get(f"{URL}/api/now/stats/incident", params={"sysparm_count": "true"}).json()
        self.assertEqual(sum(int(g["stats"]["count"]) for g in grouped), int(total["result"]["stats"]["count"]))
        labels = {g["groupby_fields"][0]["display_value"] for g in grouped}
        self.assertIn("1 - Critical", labels)


if __name__ == "__main__":
    unittest.main(verbosity=2)


class DeveloperInstanceParity(unittest.TestCase):
    """What pysnc's own test suite expects of a personal developer instance."""

    def setUp(self):
        self.client = ServiceNowClient(URL, ADMIN, verify=CA)

    def test_admin_has_the_well_known_sys_id(self):
        gr = self.client.GlideRecord("sys_user")
        self.assertTrue(gr.get("6816f79cc0a8016401c5a33be04be441"))
        self.assertEqual(gr.user_name, "admin")

    def test_join_query(self):
        gr = self.client.GlideRecord("sys_user")
        join_query = gr.add_join_query("sys_user_group", join_table_field="manager")
        join_query.add_query("active", "true")
        self.assertTrue(gr.get_encoded_query().startswith("JOINsys_user.sys_id=sys_user_group.manager!active=true"))
        gr.query()
        self.assertGreater(gr.get_row_count(), 1)

    def test_join_query_on_roles(self):
        gr = self.client.GlideRecord("sys_user")
        join_query = gr.add_join_query("sys_user_has_role", join_table_field="user")
        join_query.add_query("role", "2831a114c611228501d4ea6c309d626d")
        gr.query()
        self.assertTrue(gr.next())
        self.assertGreater(len(gr), 10)  # several admins
        self.assertLess(len(gr), 25)

    def test_related_list_query(self):
        gr = self.client.GlideRecord("sys_user_group")
        gr.add_encoded_query("RLQUERYsys_group_has_role.group,>0,m2m^role.nameLIKEadmin^ENDRLQUERY")
        gr.query()
        self.assertGreater(gr.get_row_count(), 2)
        self.assertLess(gr.get_row_count(), 8)
        advanced = self.client.GlideRecord("sys_user_group")
        condition = advanced.add_rl_query("sys_group_has_role", "group", ">0", True)
        condition.add_query("role.name", "LIKE", "admin")
        advanced.query()
        self.assertEqual(advanced.get_row_count(), gr.get_row_count())

    def test_extra_long_query_of_unknown_fields(self):
        true_id = "6816f79cc0a8016401c5a33be04be441"
        gr = self.client.GlideRecord("sys_user")
        for _ in range(2300):
            gr.add_query("AAAA", "BBBB")
        gr.add_query("sys_id", true_id)
        self.assertGreater(len(gr.get_encoded_query()), 23000)
        gr.query()
        self.assertEqual(len(gr), 1)
        self.assertTrue(gr.next())
        self.assertEqual(gr.sys_id, true_id)

    def test_syslog_has_hundreds_of_entries(self):
        gr = self.client.GlideRecord("syslog")
        gr.fields = ["sys_id"]
        gr.limit = 1100
        gr.query()
        count = 0
        while gr.next():
            count += 1
        self.assertGreater(count, 600)

    def test_insert_of_a_record_with_no_fields(self):
        # pysnc posts no body and no content type: the record is created with its defaults.
        gr = self.client.GlideRecord("problem")
        gr.initialize()
        sys_id = gr.insert()
        self.assertTrue(sys_id)
        self.assertTrue(gr.get_value("number").startswith("PRB"))
        self.assertEqual(len(gr.get_value("opened_by")), 32)
        self.assertTrue(gr.delete())

    def test_department_head_by_dot_walk(self):
        gr = self.client.GlideRecord("sys_user")
        gr.fields = "sys_id,department,department.name,department.dept_head,department.dept_head.email"
        self.assertTrue(gr.get("6816f79cc0a8016401c5a33be04be441"))
        self.assertEqual(gr.department, "a581ab703710200044e0bfc8bcbe5de8")
        self.assertEqual(gr.department.name, "Finance")
        self.assertEqual(gr.department.dept_head, "46c5bf6ca9fe1981010713e3ac7d3384")
        self.assertEqual(gr.department.dept_head.email, "natasha.ingram@example.com")

    def test_users_without_a_time_zone_see_the_instance_default(self):
        # admin has none, so dates are shown in glide.sys.default.tz (America/Los_Angeles), never in UTC.
        raw = self.client.GlideRecord("sys_user")
        raw.display_value = False
        self.assertTrue(raw.get("6816f79cc0a8016401c5a33be04be441"))
        shown = self.client.GlideRecord("sys_user")
        shown.display_value = True
        self.assertTrue(shown.get("6816f79cc0a8016401c5a33be04be441"))
        self.assertEqual(raw.sys_updated_on.get_value(), raw.sys_updated_on.get_display_value())
        self.assertNotEqual(raw.get_value("sys_updated_on"), shown.get_value("sys_updated_on"))
        self.assertEqual(raw.time_zone, "")

    def test_well_known_users_and_tables(self):
        user = self.client.GlideRecord("sys_user")
        self.assertTrue(user.get("26fbff173b331300ad3cc9bb34efc4bd"))
        self.assertEqual(user.user_name, "problem.admin")
        tables = self.client.GlideRecord("sys_db_object")
        condition = tables.add_query("name", "alm_asset")
        condition.add_or_condition("name", "bsm_chart")
        tables.query()
        self.assertEqual(sorted(t.name for t in tables), ["alm_asset", "bsm_chart"])

    def test_too_large_request_head_is_an_html_page(self):
        gr = self.client.GlideRecord("A" * 23000)
        with self.assertRaisesRegex(pysnc.exceptions.RequestException, r"^<.*html>"):
            gr.get("doesntmatter")
        small = self.client.GlideRecord("A" * 8000)
        with self.assertRaisesRegex(pysnc.exceptions.RequestException, "Invalid table"):
            small.get("doesntmatter")


class BusinessRules(unittest.TestCase):
    """sys_script records as data: a rule that aborts writes matching its filter."""

    def test_rule_aborts_matching_writes_in_a_batch(self):
        client = ServiceNowClient(URL, ADMIN, verify=CA)
        rule = client.GlideRecord("sys_script")
        rule.initialize()
        rule.name = f"reject EICAR {RUN}"
        rule.collection = "problem"
        rule.active = True
        rule.when = "before"
        rule.order = 100
        rule.action_insert = True
        rule.action_update = True
        rule.abort_action = True
        rule.add_message = True
        rule.message = f"rejected by rule {RUN}"
        rule.filter_condition = f"short_descriptionLIKEEICAR{RUN}^EQ"
        rule_id = rule.insert()
        self.assertTrue(rule_id)
        try:
            marker = f"BR{RUN}"
            for index in range(6):
                gr = client.GlideRecord("problem")
                gr.initialize()
                gr.short_description = f"{marker} {index}"
                self.assertTrue(gr.insert())
            refused = client.GlideRecord("problem")
            refused.initialize()
            refused.short_description = f"{marker} EICAR{RUN}"
            with self.assertRaisesRegex(pysnc.exceptions.RoleException, f"rejected by rule {RUN}"):
                refused.insert()
            gr = client.GlideRecord("problem")
            gr.add_query("short_description", "STARTSWITH", marker)
            gr.query()
            self.assertEqual(len(gr), 6)
            index = 0
            while gr.next():
                gr.short_description = gr.short_description + (" APPENDED" if index < 3 else f" EICAR{RUN}")
                index += 1
            self.assertFalse(gr.update_multiple())  # the aborted half failed, the other half was done
            appended = client.GlideRecord("problem")
            appended.add_encoded_query(f"short_descriptionLIKE{marker}^short_descriptionLIKEAPPENDED")
            appended.query()
            self.assertEqual(len(appended), 3)
            aborted = client.GlideRecord("problem")
            aborted.add_encoded_query(f"short_descriptionLIKEEICAR{RUN}")
            aborted.query()
            self.assertEqual(len(aborted), 0)
        finally:
            rule = client.GlideRecord("sys_script")
            self.assertTrue(rule.get(rule_id))
            rule.delete()

