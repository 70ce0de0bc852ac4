"""The task a teammate's pixi.toml (consumer-manifest) carries to check the channel before installing from it.

It runs in an environment of its own that holds no package (`no-default-feature`), so running it installs
nothing from the channel: `pixi run -e verify verify-channel` then `pixi install`. It calls `orchestrate verify
--from <channel>` with the team's keys, which names every package that is not whole, unsigned, or signed by
another key, and exits 1. pixi itself checks none of that (docs/sharing.md, "What pixi checks and what it
does not").
"""
from __future__ import annotations

import json
import shlex

from .consumer import TOKEN_VARIABLE, USERINFO_VARIABLE, channel_for_pixi, channel_with_variables, credentials_in
from .signing import plain_http_risk, trusted_keys


def verify_task_lines(channel_url: str, keys: list[str]) -> str:
    channel = channel_for_pixi(channel_url)
    checked = trusted_keys(keys, "trusted_keys (orchestrate.toml, --trusted-key)")
    command = ["orchestrate", "verify", "--from", channel]
    for key in checked:
        command += ["--trusted-key", key.text]
    task = shlex.join(command)
    carried = credentials_in(channel_url)
    if carried:  # the URL's credentials come from the teammate's environment, in double quotes the task shell expands
        task = task.replace(shlex.quote(channel), f'"{channel_with_variables(channel_url)}"', 1)
    lines = ["", "# Check the channel before installing from it (pixi checks no signature): run",
             "#   pixi run -e verify verify-channel && pixi install",
             "# It needs `orchestrate` on PATH and installs nothing from the channel."]
    if checked:
        lines.append("# It fails unless every package is whole and signed by: "
                     + ", ".join(k.name for k in checked) + ".")
    else:
        lines.append("# No trusted key was named (consumer-manifest --trusted-key, or trusted_keys in orchestrate.toml):"
                     " it checks that packages are whole, not who built them.")
    if carried:
        variable = TOKEN_VARIABLE if carried == "conda-token" else f"{USERINFO_VARIABLE} (user:password)"
        lines.append(f"# It reads the channel with its credentials: set {variable} in your environment first.")
    risk = plain_http_risk(channel, bool(checked))
    if risk:
        lines.append(f"# Warning: {risk}.")
    lines += ["[feature.verify.tasks]",
              f"verify-channel = {json.dumps(task, ensure_ascii=False)}",
              "",
              "[environments]",
              'verify = { features = ["verify"], no-default-feature = true }']
    return "\n".join(lines) + "\n"
