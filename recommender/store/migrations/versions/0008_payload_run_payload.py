"""run payload: what a run was sent (the payload's fingerprint, where it came from, its token-length histogram)

Revision ID: 0008_payload
Revises: 0007
"""
from alembic import op
import sqlalchemy as sa


revision = '0008_payload'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN (nullable, no default): runs stored before it read None, "not recorded"
    op.add_column('runs', sa.Column('payload', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('payload')
