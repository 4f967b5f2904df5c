"""Read the calendar invites of raw MIME messages with Python's `email` parser and the
`icalendar` library, placing each event's local times with the message's own VTIMEZONE.

tests/tests/bookings.rs runs this with `["<raw message>", ...]` on stdin; it prints, per
message, the invite's part method, the calendar's METHOD, and the event's UID, SEQUENCE,
STATUS, TZID and its start and end in UTC (ISO 8601).
"""

import datetime
import email
import email.policy
import json
import sys

from icalendar import Calendar

out = []
for raw in json.load(sys.stdin):
    msg = email.message_from_string(raw, policy=email.policy.default)
    part = next(p for p in msg.walk() if p.get_content_type() == "text/calendar")
    cal = Calendar.from_ical(part.get_content())
    zones = {str(tz["TZID"]): tz.to_tz() for tz in cal.walk("VTIMEZONE")}
    event = cal.walk("VEVENT")[0]

    def utc(prop):
        value = event[prop]
        tzid = str(value.params["TZID"])
        local = value.dt.replace(tzinfo=None)
        return local.replace(tzinfo=zones[tzid]).astimezone(datetime.timezone.utc).isoformat()

    out.append({
        "part_method": part.get_param("method"),
        "method": str(cal["METHOD"]),
        "uid": str(event["UID"]),
        "sequence": int(event["SEQUENCE"]),
        "status": str(event["STATUS"]),
        "tzid": str(event["DTSTART"].params["TZID"]),
        "start": utc("DTSTART"),
        "end": utc("DTEND"),
        "organizer": str(event["ORGANIZER"]),
        "attendee": str(event["ATTENDEE"]),
    })
print(json.dumps(out))
