#!/bin/sh
# The demo's scripted worker: it follows the worker contract like an agent CLI would, without
# an API key. It reads the prompt from $DAGEXEC_PROMPT_FILE, appends a marker line
# "dagexec-task-<index>" to every file the prompt's "Files to create:" and "Files to modify:"
# lines name, writes a work log to $DAGEXEC_LOG_FILE, and prints its status line last.
# Task 1 fails its first attempt on purpose, so the demo shows a retry
# ($DAGEXEC_DEMO_FLAKY_TASK picks another task, "none" turns it off; $DAGEXEC_DEMO_DELAY sets
# how long each task "thinks", 0.4 s by default).
set -u
i="$DAGEXEC_TASK_INDEX"
log="$DAGEXEC_LOG_FILE"
mkdir -p "$(dirname "$log")"
echo "task $i, attempt $DAGEXEC_ATTEMPT, round $DAGEXEC_ROUND, model ${DAGEXEC_MODEL:-none}" > "$log"
sleep "${DAGEXEC_DEMO_DELAY:-0.4}"
if [ "$i" = "${DAGEXEC_DEMO_FLAKY_TASK:-1}" ] && [ "$DAGEXEC_ATTEMPT" = 1 ]; then
  echo "simulated a flaky tool on the first attempt" >> "$log"
  echo "FAILED: the formatter crashed (the demo worker fails task $i's first attempt on purpose)"
  exit 0
fi
if grep -q '^## Retry context' "$DAGEXEC_PROMPT_FILE"; then
  echo "saw the retry context:" >> "$log"
  sed -n '/^## Retry context/,$p' "$DAGEXEC_PROMPT_FILE" >> "$log"
fi
subject=$(sed -n 's/^## Task: //p' "$DAGEXEC_PROMPT_FILE" | head -n 1)
files=$(sed -n -e 's/^Files to create: //p' -e 's/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" \
  | tr ',' '\n' | sed 's/^ *//; s/ *$//' | grep -v '^(none)$' | grep -v '^$')
echo "$files" | while IFS= read -r f; do
  [ -n "$f" ] || continue
  mkdir -p "$(dirname "$f")"
  echo "dagexec-task-$i: $subject" >> "$f"
  echo "wrote $f" >> "$log"
done
echo "working on: $subject"
echo "COMPLETED: $(echo "$files" | tr '\n' ' ' | sed 's/ *$//') updated for \"$subject\""
