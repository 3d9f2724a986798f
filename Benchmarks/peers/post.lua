-- wrk: POST the body in $BODY with the Authorization header in $AUTH (a new record per request).
wrk.method = "POST"
wrk.body = os.getenv("BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = os.getenv("AUTH")
