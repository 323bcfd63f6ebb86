"""Honcho's README quick-start, with the honcho-ai package from PyPI, against this server.

Run by the integration test `rest_python_quickstart` (HONCHO_URL is the server's address); it
prints OK on the last line when every step did what it should.
"""

import os

from honcho import Honcho

honcho = Honcho(base_url=os.environ["HONCHO_URL"], workspace_id="quickstart", api_key="unused")

alice = honcho.peer("alice")
tutor = honcho.peer("tutor")
session = honcho.session("session-1")
session.add_peers([alice, tutor])
session.add_messages(
    [
        alice.message("Hey there, can you help me with my math homework?"),
        tutor.message("Absolutely! Send me your first problem."),
    ]
)

messages = list(session.messages())
assert [m.content for m in messages][0].startswith("Hey there"), messages
assert {p.id for p in session.peers()} == {"alice", "tutor"}

hits = session.search("math homework")
assert hits and "math homework" in hits[0].content, hits

alice_on_herself = alice.conclusions
alice_on_herself.create([{"content": "alice studies math", "session_id": "session-1"}])
listed = list(alice_on_herself.list())
assert [c.content for c in listed] == ["alice studies math"], listed

print("OK")
