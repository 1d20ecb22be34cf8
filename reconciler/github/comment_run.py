"""One comment being handled (an apply or a rollback): where to reply, how to react, and
what to report as the step's outputs. Apart from both runs, which each take one."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.github.client import GitHubClient, GitHubError
from reconciler.github.event import Context
from reconciler.github.truncation import fit_comment
from reconciler.github.workflow_commands import Outputs, log, write_summary
from reconciler.support.errors import ReconcileError


@dataclass
class CommentRun:
    """One apply request being handled: where to reply and what to report."""

    context: Context
    client: GitHubClient
    number: int
    comment_id: int
    login: str
    outputs: Outputs
    created_at: str  # when the comment was made (GitHub's ISO 8601 UTC timestamp)

    def react(self, content: str) -> None:
        """Reactions are feedback only: a failure to add one is logged, not fatal."""
        try:
            self.client.react(self.context.repository, self.comment_id, content)
        except (GitHubError, ReconcileError) as error:
            log(f"could not add the {content} reaction: {error}")

    def reply(self, body: str) -> None:
        write_summary(self.context.step_summary, body)
        comment = self.client.create_comment(self.context.repository, self.number,
                                             fit_comment("", body, ""))
        self.outputs.set("comment-url", comment.get("html_url", ""))
