// Conclusion levels, in the order a reasoning chain climbs them, with their colours.
export const LEVELS = {
  EXPLICIT: { label: 'explicit', color: '#2563eb' },
  DEDUCTIVE: { label: 'deductive', color: '#059669' },
  INDUCTIVE: { label: 'inductive', color: '#d97706' },
  CONTRADICTION: { label: 'contradiction', color: '#dc2626' },
};

export const levelColor = (level) => LEVELS[level]?.color ?? '#6b7280';

export function LevelLegend() {
  return (
    <div className="legend">
      {Object.entries(LEVELS).map(([key, { label, color }]) => (
        <span key={key}>
          <i style={{ background: color }} /> {label}
        </span>
      ))}
    </div>
  );
}
