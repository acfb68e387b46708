"""Resolves every reference of an installed hypd-inst-agent the way Kiro CLI 3 reads it.
Test infrastructure.

Usage: kiro_agent_check.py HOME  — prints one JSON object: the profile's front matter parsed as
YAML, its body, and for each `skill://` resource whether ~/.kiro/skills/<name>/SKILL.md exists
and names itself in its own front matter.
"""
import json
import os
import sys

import yaml

home = sys.argv[1]
path = os.path.join(home, ".kiro", "agents", "hypd-inst-agent.md")
text = open(path).read()
assert text.startswith("---\n"), "front matter first"
head, body = text[4:].split("\n---\n", 1)
front = yaml.safe_load(head)
skills = {}
for uri in front.get("resources", []):
    assert uri.startswith("skill://"), uri
    name = uri[len("skill://"):]
    skill = os.path.join(home, ".kiro", "skills", name, "SKILL.md")
    found = os.path.exists(skill)
    named = None
    if found:
        s = open(skill).read()
        named = yaml.safe_load(s[4:].split("\n---\n", 1)[0]).get("name")
    skills[name] = {"found": found, "name": named}
print(json.dumps({"front": front, "body": body, "skills": skills}))
