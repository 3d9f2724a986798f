"""The Python gql client (unmodified, from PyPI) against docketd's two GraphQL dialects over HTTPS:
ServiceNow's /api/now/graphql (the NowData SDK's documented query) and the DataSync task API at /graphql
(the showcase clients' operations verbatim, a version conflict), over HTTP and over WebSockets in both
subprotocols (graphql-transport-ws and the legacy graphql-ws): subscriptions that see creates, updates and
deletes, a resume without loss while writes continue, and a revoked token's socket closed."""
import asyncio
import ssl
import threading
import unittest
import uuid

import requests
import websockets
from gql import Client, gql
from gql.transport.exceptions import TransportQueryError
from gql.transport.requests import RequestsHTTPTransport
from gql.transport.websockets import WebsocketsTransport

GRAPHQL_TRANSPORT_WS = "graphql-transport-ws"
GRAPHQL_WS = "graphql-ws"
SUBPROTOCOLS = (GRAPHQL_TRANSPORT_WS, GRAPHQL_WS)

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


def token(user=ITIL):
    return requests.post(f"{URL}/oauth_token.do", verify=CA, data={
        "grant_type": "password", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
        "username": user[0], "password": user[1]}).json()["access_token"]


def socket(path, subprotocol, payload):
    context = ssl.create_default_context(cafile=CA)
    return WebsocketsTransport(url=URL.replace("https://", "wss://") + path, ssl=context, init_payload=payload,
                               subprotocols=[subprotocol])


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def later(delay, action):
    """Runs action on a thread after delay seconds (while a subscription waits)."""
    timer = threading.Timer(delay, action)
    timer.start()
    return timer


class DataSyncSubscriptions(unittest.TestCase):
    """The showcase's operations over each WebSocket subprotocol, with Apollo iOS's connection_init payload."""

    def test_operations_and_subscriptions(self):
        for subprotocol in SUBPROTOCOLS:
            with self.subTest(subprotocol=subprotocol):
                run(self.exercise(subprotocol))

    async def exercise(self, subprotocol):
        payload = {"Authorization": "Bearer " + token()} if subprotocol == GRAPHQL_TRANSPORT_WS else \
            {"authorization": "Bearer " + token()}
        http = client("/graphql")
        async with Client(transport=socket("/graphql", subprotocol, payload)) as session:
            listed = await session.execute(gql("query allTasks { allTasks { __typename ...TaskFields } }\n" + FRAGMENT))
            self.assertIsInstance(listed["allTasks"], list)
            title = "ws " + uuid.uuid4().hex[:8]
            # taskAdded sees a task created through HTTP.
            added = session.subscribe(gql("subscription add { taskAdded { __typename ...TaskFields } }\n" + FRAGMENT))
            create = gql("mutation createTask($title: String!, $description: String!, $status: TaskStatus!) { "
                         "createTask(title: $title, description: $description, status: $status) { __typename ...TaskFields } }\n"
                         + FRAGMENT)
            later(0.5, lambda: http.execute(create, variable_values={"title": title, "description": "d", "status": "OPEN"}))
            async for result in added:
                task = result["taskAdded"]
                if task["title"] == title:
                    break
            self.assertEqual((task["__typename"], task["version"], task["status"]), ("Task", 1, "OPEN"))
            # taskUpdated sees a change made over this socket.
            updated = session.subscribe(gql("subscription { taskUpdated { id title version } }"))
            update = gql("mutation updateTask($description: String, $id: ID!, $title: String, $version: Int!, "
                         "$status: TaskStatus) { updateTask(description: $description, id: $id, title: $title, "
                         "version: $version, status: $status) { id version } }")
            later(0.5, lambda: http.execute(update, variable_values={"id": task["id"], "title": title + "!", "version": 1}))
            async for result in updated:
                if result["taskUpdated"]["id"] == task["id"]:
                    self.assertEqual((result["taskUpdated"]["title"], result["taskUpdated"]["version"]), (title + "!", 2))
                    break
            # taskDeleted carries the whole deleted task.
            deleted = session.subscribe(gql("subscription delete { taskDeleted { __typename ...TaskFields } }\n" + FRAGMENT))
            later(0.5, lambda: http.execute(gql("mutation deleteTask($id: ID!) { deleteTask(id: $id) }"),
                                            variable_values={"id": task["id"]}))
            async for result in deleted:
                gone = result["taskDeleted"]
                if gone["id"] == task["id"]:
                    self.assertEqual((gone["title"], gone["version"], gone["description"]), (title + "!", 2, "d"))
                    break
            # A mutation over the socket itself.
            mine = await session.execute(create, variable_values={"title": title, "description": "ws", "status": "OPEN"})
            self.assertEqual(mine["createTask"]["version"], 1)
            await session.execute(gql("mutation ($id: ID!) { deleteTask(id: $id) }"),
                                  variable_values={"id": mine["createTask"]["id"]})

    def test_refusals(self):
        async def wrong_token():
            with self.assertRaises(Exception):
                async with Client(transport=socket("/graphql", GRAPHQL_TRANSPORT_WS, {"Authorization": "Bearer nope"})):
                    pass

        async def unknown_subprotocol():
            context = ssl.create_default_context(cafile=CA)
            async with websockets.connect(URL.replace("https://", "wss://") + "/graphql", ssl=context,
                                          subprotocols=["chat"]) as ws:
                with self.assertRaises(websockets.ConnectionClosed) as caught:
                    await ws.recv()
                self.assertEqual(caught.exception.rcvd.code, 4406)

        run(wrong_token())
        run(unknown_subprotocol())


class NowSubscriptions(unittest.TestCase):
    """Docket's per-table subscription on /api/now/graphql."""

    DOCUMENT = ("subscription ($q: String, $since: Long) { incident(queryConditions: $q, since: $since) { sequence change "
                "operation sys_id record { number { value } short_description { value displayValue } } "
                "previous { short_description { value } } } }")

    def test_create_update_delete_and_resume(self):
        for subprotocol in SUBPROTOCOLS:
            with self.subTest(subprotocol=subprotocol):
                run(self.exercise(subprotocol))

    async def exercise(self, subprotocol):
        marker = "sub " + uuid.uuid4().hex[:8]
        query = "short_descriptionSTARTSWITH" + marker
        table = f"{URL}/api/now/table/incident"
        payload = {"Authorization": "Bearer " + token()}

        def writes():
            created = requests.post(table, auth=ITIL, verify=CA, json={"short_description": marker + " a"}).json()["result"]
            requests.patch(f"{table}/{created['sys_id']}", auth=ITIL, verify=CA, json={"short_description": marker + " b"})
            requests.delete(f"{table}/{created['sys_id']}", auth=ITIL, verify=CA)

        async with Client(transport=socket("/api/now/graphql", subprotocol, payload)) as session:
            seen = []
            later(0.5, writes)
            async for result in session.subscribe(gql(self.DOCUMENT), variable_values={"q": query}):
                seen.append(result["incident"])
                if len(seen) == 3:
                    break
        self.assertEqual([c["change"] for c in seen], ["entered", "changed", "deleted"])
        self.assertEqual([c["operation"] for c in seen], ["insert", "update", "delete"])
        self.assertEqual(seen[1]["previous"]["short_description"]["value"], marker + " a")
        self.assertEqual(seen[1]["record"]["short_description"]["value"], marker + " b")
        self.assertTrue(seen[0]["record"]["number"]["value"].startswith("INC"))
        self.assertEqual(sorted(c["sequence"] for c in seen), [c["sequence"] for c in seen])

    def test_resume_without_loss_while_writing(self):
        marker = "resume " + uuid.uuid4().hex[:8]
        query = "short_descriptionSTARTSWITH" + marker
        total = 30

        def writer():
            session = requests.Session()
            session.auth, session.verify = ITIL, CA
            for index in range(total):
                session.post(f"{URL}/api/now/table/incident", json={"short_description": f"{marker} {index}"})

        async def follow(since, count):
            payload = {"Authorization": "Bearer " + token()}
            async with Client(transport=socket("/api/now/graphql", GRAPHQL_TRANSPORT_WS, payload)) as session:
                got = []
                async for result in session.subscribe(gql(self.DOCUMENT), variable_values={"q": query, "since": since}):
                    got.append(result["incident"])
                    if len(got) == count:
                        return got

        start = requests.get(f"{URL}/api/docket/events", auth=ITIL, verify=CA,
                             params={"follow": "false"}).text
        since = int(start.split("id: ")[1].split("\n")[0]) if "id: " in start else 0
        thread = threading.Thread(target=writer)
        thread.start()
        try:
            first = run(follow(since, 10))
            # Disconnected while writes go on; resume after the last sequence received.
            rest = run(follow(first[-1]["sequence"], total - 10))
        finally:
            thread.join()
        names = [c["record"]["short_description"]["value"] for c in first + rest]
        self.assertEqual(names, [f"{marker} {index}" for index in range(total)])
        sequences = [c["sequence"] for c in first + rest]
        self.assertEqual(sequences, sorted(set(sequences)))

    def test_revoked_token_closes_the_socket(self):
        access = token()

        async def revoked():
            context = ssl.create_default_context(cafile=CA)
            async with websockets.connect(URL.replace("https://", "wss://") + "/api/now/graphql", ssl=context,
                                          subprotocols=[GRAPHQL_TRANSPORT_WS]) as ws:
                await ws.send('{"type":"connection_init","payload":{"Authorization":"Bearer ' + access + '"}}')
                self.assertIn("connection_ack", await ws.recv())
                await ws.send('{"type":"subscribe","id":"1","payload":{"query":"subscription { incident { sequence } }"}}')
                await asyncio.get_running_loop().run_in_executor(None, lambda: requests.post(
                    f"{URL}/oauth_revoke_token.do", data={"token": access}, verify=CA))
                with self.assertRaises(websockets.ConnectionClosed) as caught:
                    while True:
                        await asyncio.wait_for(ws.recv(), 10)
                self.assertEqual(caught.exception.rcvd.code, 4403)

        run(revoked())


if __name__ == "__main__":
    unittest.main()
