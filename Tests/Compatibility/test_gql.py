"""The Python gql client (unmodified, from PyPI) against docketd's two GraphQL dialects over HTTPS:
ServiceNow's /api/now/graphql (the NowData SDK's documented query) and the DataSync task API at /graphql
(the showcase clients' operations verbatim, a version conflict). WebSocket subscriptions are not served yet."""
import unittest
import uuid

import requests
from gql import Client, gql
from gql.transport.exceptions import TransportQueryError
from gql.transport.requests import RequestsHTTPTransport

from common import ADMIN, CA, CLIENT_ID, CLIENT_SECRET, ITIL, URL

FRAGMENT = "fragment TaskFields on Task { __typename id title version description status }"


def client(path, auth=ITIL, headers=None):
    transport = RequestsHTTPTransport(url=URL + path, auth=auth, verify=CA, headers=headers or {}, retries=0)
    return Client(transport=transport, fetch_schema_from_transport=False)


class NowDataGraphQL(unittest.TestCase):
    def test_documented_knowledge_query(self):
        document = gql('{ GlideRecord_Query { kb_knowledge(queryConditions: "active=true^ORDERBYpublishedDESC" '
                       'pagination: { limit: 10, offset: 0 }) { _results { sys_id { value }, number { displayValue }, '
                       'short_description { displayValue }, author { displayValue } published { displayValue } } } } }')
        result = client("/api/now/graphql").execute(document)
        rows = result["GlideRecord_Query"]["kb_knowledge"]["_results"]
        self.assertTrue(rows)
        table = requests.get(f"{URL}/api/now/table/kb_knowledge", auth=ITIL, verify=CA, params={
            "sysparm_query": "active=true^ORDERBYDESCpublished", "sysparm_limit": 10, "sysparm_fields": "sys_id"}).json()["result"]
        self.assertEqual([row["sys_id"]["value"] for row in rows], [row["sys_id"] for row in table])
        self.assertTrue(all(row["number"]["displayValue"].startswith("KB") for row in rows))

    def test_variables_aliases_and_mutation(self):
        gql_client = client("/api/now/graphql")
        marker = "gql " + uuid.uuid4().hex[:8]
        inserted = gql_client.execute(gql(
            'mutation ($text: String!) { GlideRecord_Mutation { insert_incident(short_description: $text, urgency: "1") '
            '{ _results { sys_id { value } number { value } } } } }'), variable_values={"text": marker})
        sys_id = inserted["GlideRecord_Mutation"]["insert_incident"]["_results"][0]["sys_id"]["value"]
        read = gql_client.execute(gql(
            'query ($qc: String!) { GlideRecord_Query { mine: incident(queryConditions: $qc) { _rowCount _results { '
            'sys_id { value } urgency { value displayValue } state { value displayValue } } } } }'),
            variable_values={"qc": "short_description=" + marker})
        mine = read["GlideRecord_Query"]["mine"]
        self.assertEqual(mine["_rowCount"], 1)
        self.assertEqual(mine["_results"][0]["sys_id"]["value"], sys_id)
        self.assertEqual(mine["_results"][0]["urgency"]["value"], "1")
        deleted = gql_client.execute(gql(
            'mutation ($id: String!) { GlideRecord_Mutation { delete_incident(sys_id: $id) { sys_id } } }'),
            variable_values={"id": sys_id})
        self.assertEqual(deleted["GlideRecord_Mutation"]["delete_incident"]["sys_id"], sys_id)

    def test_errors_are_in_band(self):
        with self.assertRaises(TransportQueryError) as caught:
            client("/api/now/graphql").execute(gql("{ GlideRecord_Query { incident { _results { nope { value } } } } }"))
        self.assertIn("nope", str(caught.exception))


class DataSyncTasks(unittest.TestCase):
    def test_showcase_operations_verbatim(self):
        gql_client = client("/graphql")
        created = gql_client.execute(gql(
            "mutation createTask($title: String!, $description: String!, $status: TaskStatus!) { createTask(title: $title, "
            "description: $description, status: $status) { __typename ...TaskFields } }\n" + FRAGMENT),
            variable_values={"title": "From gql", "description": "Showcase", "status": "OPEN"}, operation_name="createTask")
        task = created["createTask"]
        self.assertEqual((task["__typename"], task["status"], task["version"]), ("Task", "OPEN", 1))
        listed = gql_client.execute(gql("query allTasks { allTasks { __typename ...TaskFields } }\n" + FRAGMENT),
                                    operation_name="allTasks")
        self.assertIn(task["id"], [t["id"] for t in listed["allTasks"]])
        first = gql_client.execute(gql("query allTasks($first: Int) { allTasks(first: $first) { id title description version status } }"),
                                   variable_values={"first": 1})
        self.assertEqual(len(first["allTasks"]), 1)
        removed = gql_client.execute(gql("mutation deleteTask($id: ID!) { deleteTask(id: $id) }"),
                                     variable_values={"id": task["id"]}, operation_name="deleteTask")
        self.assertEqual(removed["deleteTask"], task["id"])

    def test_version_conflict(self):
        gql_client = client("/graphql")
        task = gql_client.execute(gql('mutation { createTask(title: "A", description: "d") { id version } }'))["createTask"]
        update = gql("mutation updateTask($description: String, $id: ID!, $title: String, $version: Int!, $status: TaskStatus) "
                     "{ updateTask(description: $description, id: $id, title: $title, version: $version, status: $status) "
                     "{ id title description version status } }")
        done = gql_client.execute(update, variable_values={"id": task["id"], "title": "B", "version": 1})
        self.assertEqual(done["updateTask"]["version"], 2)
        with self.assertRaises(TransportQueryError) as caught:
            client("/graphql", auth=ADMIN).execute(update, variable_values={"id": task["id"], "title": "C", "version": 1})
        error = caught.exception.errors[0]
        self.assertEqual(error["message"], "OffixConflict")
        info = error["extensions"]["exception"]["conflictInfo"]
        self.assertEqual(info["serverState"]["title"], "B")
        self.assertEqual(info["clientState"]["version"], 1)

    def test_bearer_token(self):
        token = requests.post(f"{URL}/oauth_token.do", verify=CA, data={
            "grant_type": "password", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "username": ITIL[0], "password": ITIL[1]}).json()["access_token"]
        result = client("/graphql", auth=None, headers={"Authorization": "Bearer " + token}).execute(gql("{ allTasks { id } }"))
        self.assertIsInstance(result["allTasks"], list)
        anonymous = requests.post(f"{URL}/graphql", json={"query": "{ allTasks { id } }"}, verify=CA)
        self.assertEqual(anonymous.status_code, 401)


if __name__ == "__main__":
    unittest.main()
