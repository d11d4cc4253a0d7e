"""window generation: a generative window's figures (token totals, TTFT / ITL percentiles, kept per-request figures)

Revision ID: 0009_genmetrics
Revises: 0008_payload
"""
from alembic import op
import sqlalchemy as sa


revision = '0009_genmetrics'
down_revision = '0008_payload'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN (nullable, no default): windows stored before it, and every embedding window, read None
    op.add_column('windows', sa.Column('generation', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('windows') as batch:
        batch.drop_column('generation')
