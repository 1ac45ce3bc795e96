"""Reads an OTF2 archive with the OTF2 library's own Python module (Debian's
python3-otf2, for /usr/bin/python3) and prints what the OTF2 export test checks, as JSON:
the definitions, per location its events by type, its Enters and Leaves by region and the
last value of the critical-path metric, and how the point-to-point events pair up.

Usage: /usr/bin/python3 otf2_summary.py DIR/traces.otf2
"""

import collections
import json
import sys

import otf2


def main(anchor):
    with otf2.reader.open(anchor) as trace:
        d = trace.definitions
        locations = {}
        last_ts = {}
        sends = collections.defaultdict(collections.deque)
        receives = []
        created = collections.Counter()
        begun = collections.Counter()
        ended = collections.Counter()
        out_of_order = 0
        for loc, ev in trace.events:
            ref = str(loc._ref)
            entry = locations.setdefault(
                ref,
                {
                    "group": loc.group.name,
                    "events": collections.Counter(),
                    "enters": collections.Counter(),
                    "leaves": collections.Counter(),
                    "critical_path_ns": 0,
                },
            )
            kind = type(ev).__name__
            entry["events"][kind] += 1
            if ref in last_ts and ev.time < last_ts[ref]:
                out_of_order += 1
            last_ts[ref] = ev.time
            if kind == "Enter":
                entry["enters"][ev.region.name] += 1
            elif kind == "Leave":
                entry["leaves"][ev.region.name] += 1
            elif kind == "Metric":
                entry["critical_path_ns"] = ev.values[0]
            elif kind in ("MpiSend", "MpiIsend"):
                members = ev.communicator.group.members
                key = (ev.communicator.name, ref, str(members[ev.receiver]._ref), ev.msg_tag)
                sends[key].append(ev.msg_length)
            elif kind in ("MpiRecv", "MpiIrecv"):
                members = ev.communicator.group.members
                key = (ev.communicator.name, str(members[ev.sender]._ref), ref, ev.msg_tag)
                receives.append((key, ev.msg_length))
            elif kind == "ThreadCreate":
                created[(ev.thread_contingent.name, ev.sequence_count)] += 1
            elif kind == "ThreadBegin":
                begun[(ev.thread_contingent.name, ev.sequence_count)] += 1
            elif kind == "ThreadEnd":
                ended[(ev.thread_contingent.name, ev.sequence_count)] += 1
        # Every receive takes the oldest send of its (comm, sender, receiver, tag).
        matched = same_length = unmatched_receives = 0
        for key, length in receives:
            if sends[key]:
                sent = sends[key].popleft()
                matched += 1
                same_length += sent == length
            else:
                unmatched_receives += 1
        print(
            json.dumps(
                {
                    "clock": {
                        "resolution": d.clock_properties.timer_resolution,
                        "offset": d.clock_properties.global_offset,
                        "length": d.clock_properties.trace_length,
                    },
                    "system_tree_nodes": [n.name for n in d.system_tree_nodes],
                    "location_groups": [g.name for g in d.location_groups],
                    "regions": {
                        r.name: [str(r.region_role).split(".")[-1], str(r.paradigm).split(".")[-1]]
                        for r in d.regions
                    },
                    "comms": [c.name for c in d.comms],
                    "metrics": [m.name for m in d.metric_members],
                    "locations": locations,
                    "out_of_order": out_of_order,
                    "messages": {
                        "matched": matched,
                        "same_length": same_length,
                        "unmatched_receives": unmatched_receives,
                        "unmatched_sends": sum(len(q) for q in sends.values()),
                    },
                    "threads": {
                        "created": sum(created.values()),
                        "begun": sum(begun.values()),
                        "ended": sum(ended.values()),
                        "created_and_begun": sum(1 for k in created if begun[k] == 1),
                    },
                }
            )
        )


if __name__ == "__main__":
    main(sys.argv[1])
