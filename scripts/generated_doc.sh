# shellcheck shell=bash
# Sourced by the scripts that write a generated file under docs/ (schema.sh, statements.sh):
# `generated_doc NAME FILE "$@"` reads their one option, --check, into $check; finds the outboxd
# to ask, OUTBOXD_BIN or build/daemon/outboxd rebuilt first, into $outboxd; defines die and
# write_or_check. Run from the repository's root.

generated_doc() {
  doc_name=$1
  doc_file=$2
  shift 2
  check=0
  case ${1:-} in
    --check) check=1 ;;
    '') ;;
    *) echo "usage: scripts/$doc_name [--check]" >&2; exit 2 ;;
  esac
  if [[ -n ${OUTBOXD_BIN:-} ]]; then
    outboxd=$OUTBOXD_BIN
  else
    [[ -f build/build.ninja ]] || die "no build/: run scripts/setup.sh --target outboxd first (or set OUTBOXD_BIN)"
    cmake --build build --target outboxd -- --quiet | { grep -v '^ninja: no work to do\.$' || true; }
    outboxd=$PWD/build/daemon/outboxd
  fi
  [[ -x $outboxd ]] || die "no outboxd at $outboxd"
}

die() { printf '%s: %s\n' "$doc_name" "$*" >&2; exit 1; }

# With --check, `new` (the file as generated now) against the committed one: exit 1 with the diff
# when they differ; otherwise `new` becomes the file. `what` names what the file must match.
write_or_check() {
  local new=$1 what=$2 summary=$3
  if ((check)); then
    if ! diff -u "$doc_file" "$new" >"$new.diff"; then
      cat "$new.diff"
      die "$doc_file is not $what (above: - the file, + now): run scripts/$doc_name and commit $doc_file"
    fi
    echo "$doc_name: $doc_file matches $summary"
  else
    cp "$new" "$doc_file"
    echo "$doc_name: wrote $doc_file ($summary, $(wc -l <"$doc_file") lines)"
  fi
}
